"""Decoding, step by step, as a page and as terminal lines: ``steps_html`` / ``steps_lines`` for autoregressive
decoding (``generation.steps``), ``nat_steps_html`` / ``nat_steps_lines`` for a NAT model's passes
(``generation.nat_steps``).

The autoregressive page has a row per step: the decoder's input (the start token and every token written so far,
the newest one just fed back), the most likely next tokens with their probabilities and the token written. A click
on another candidate shows the continuation had it been chosen (greedy after it), and where it leaves the free walk;
the walks forced from the command line (``translate --force STEP:TOKEN``) are in the menu. The NAT page shows the
length classifier's choice, the row of start tokens, the tokens written at once and each Mask-Predict pass's
re-masked positions and new tokens, for every length tried. Steps are numbered from 1 everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ..generation.nat_steps import NATSteps
from ..generation.steps import Step, Steps
from .page import read_page_data, write_page

__all__ = ["steps_html", "steps_lines", "nat_steps_html", "nat_steps_lines", "read_steps_html"]

Piece = Callable[[int], str]
Text = Callable[[list[int]], str]

_AR_BODY = """<h2 id="title"></h2>
<p class="note">Autoregressive decoding, one token per step (greedy: the most likely token is written). The decoder
starts from the start token; at each step it reads its input row (the start token and every token written so far)
and the source, gives every token of its vocabulary a probability, writes the most likely one and feeds it back as
the next step's input, until END. Steps are numbered from 1; the newest input token (just fed back) is marked.</p>
<p class="note" id="notes"></p>
<div class="controls"><label>Walk <select id="walk"></select></label></div>
<p class="lab" id="walk-text"></p>
<table class="chain steps" id="steps"><thead><tr><th>step</th><th>the decoder's input (fed back)</th>
<th>most likely next tokens (probability); click one to choose it instead</th><th>written</th></tr></thead>
<tbody></tbody></table>
<div class="step" id="whatif"><h3>One wrong step, every step wrong?</h3>
<p class="note" id="whatif-note">Click a candidate that was not written: the walk is forced to write it at that
step, and greedy decoding continues from there.</p><div id="whatif-box"></div></div>
"""

_NAT_BODY = """<h2 id="title"></h2>
<p class="note">Non-autoregressive decoding (Mask-Predict): the output length is chosen first; the decoder gets a row
of that many start tokens (the mask token) and writes every token at once, each position its most likely token.
Each later pass masks again the least confident tokens and writes them anew from the others; the other tokens
stay. Passes and positions are numbered from 1.</p>
<p class="note" id="notes"></p>
<h3>1. The length</h3><div id="lengths"></div>
<h3>2. The passes</h3>
<div class="controls"><label>Length tried <select id="cand"></select></label></div>
<p class="lab" id="cand-text"></p>
<div class="scroll"><table class="chain passes" id="passes"><tbody></tbody></table></div>
"""


def _step(s: Step) -> dict:
    return {"c": s.chosen, "p": s.prob, "top": [[i, p] for i, p in s.top], "f": s.forced}


def _pieces(ids: set[int], piece: Piece) -> dict[str, str]:
    return {str(i): piece(i) for i in sorted(ids)}


def steps_html(steps: Steps, source: Sequence[str], piece: Piece, text: Text, path: str | os.PathLike, *,
               title: str = "decoding, step by step", notes: str = "", eos: int | None = None) -> Path:
    """Write the autoregressive page: ``source`` pieces, ``piece(id)`` a token's label, ``text(ids)`` the
    detokenised text of a walk's tokens. Returns the path."""
    seen = {steps.start}
    walks = [("greedy", steps.free)] + [(", ".join(f"step {t + 1} forced to {piece(v)!r}" for t, v in f.items()), w)
                                        for f, w in steps.forced]
    for _, w in walks:
        seen |= {s.chosen for s in w} | {i for s in w for i, _ in s.top}
    for w in steps.alternatives.values():
        seen |= {s.chosen for s in w}
    data = {"kind": "ar", "title": str(title), "notes": str(notes), "source": [str(t) for t in source],
            "start": steps.start, "eos": eos,
            "walks": [{"name": n, "text": text(Steps.tokens(w)), "steps": [_step(s) for s in w]} for n, w in walks],
            "alternatives": {f"{t},{tok}": {"text": text(Steps.tokens(steps.free[:t]) + Steps.tokens(w)),
                                            "steps": [{"c": s.chosen, "p": s.prob, "f": s.forced} for s in w]}
                             for (t, tok), w in steps.alternatives.items()},
            "pieces": _pieces(seen, piece)}
    return write_page(path, title=title, body=_AR_BODY, scripts=["steps.js"], data=data)


def steps_lines(steps: Steps, piece: Piece, text: Text) -> list[str]:
    """The walks as terminal lines: per step the input's newest token, the candidates and the token written."""
    out = []
    walks = [("greedy decoding, step by step", {}, steps.free)] + [
        ("forced: " + ", ".join(f"step {t + 1} writes {piece(v)!r}" for t, v in f.items()), f, w)
        for f, w in steps.forced]
    for name, forced, w in walks:
        out.append(f"{name} (step: the newest input token -> the most likely next tokens -> written)")
        inputs = [steps.start] + Steps.tokens(w)
        for t, s in enumerate(w):
            cands = "  ".join(f"{piece(i)} {p:.3f}" for i, p in s.top)
            mark = f"  FORCED (p={s.prob:.3f})" if s.forced else ""
            out.append(f"  {t + 1:>3}  {piece(inputs[t]):>12} -> {cands}  => {piece(s.chosen)}{mark}")
        if forced:
            t = min(forced)
            later = sum(a.chosen != b.chosen for a, b in zip(w[t + 1:], steps.free[t + 1:]))
            out.append(f"  {later} of the {max(len(w), len(steps.free)) - t - 1} later steps write another token "
                       "than the greedy walk")
        out.append(f"  -> {text(Steps.tokens(w))}")
    return out


def nat_steps_html(ns: NATSteps, source: Sequence[str], piece: Piece, text: Text, path: str | os.PathLike, *,
                   title: str = "non-autoregressive decoding, pass by pass", notes: str = "") -> Path:
    """Write the NAT page (the lengths, then each candidate's passes). Returns the path."""
    seen = {ns.mask_id} | {t for c in ns.candidates for p in c.passes for t in p.tokens}
    data = {"kind": "nat", "title": str(title), "notes": str(notes), "source": [str(t) for t in source],
            "mask": ns.mask_id, "lengths": [[t, c, p] for t, c, p in ns.lengths], "chosen": ns.chosen,
            "text": text(ns.tokens),
            "candidates": [{"length": c.length, "score": c.score, "text": text(c.passes[-1].tokens),
                            "passes": [{"masked": p.masked, "tokens": p.tokens, "probs": p.probs} for p in c.passes]}
                           for c in ns.candidates],
            "pieces": _pieces(seen, piece)}
    return write_page(path, title=title, body=_NAT_BODY, scripts=["steps.js"], data=data)


def nat_steps_lines(ns: NATSteps, piece: Piece, text: Text) -> list[str]:
    """The NAT decoding as terminal lines: lengths, then each pass of the kept candidate."""
    out = []
    if ns.lengths:
        out.append("length classifier: " + "  ".join(f"{t}{'' if t == c else f' (-> {c})'} tokens {p:.3f}"
                                                     for t, c, p in ns.lengths))
    tried = ", ".join(str(c.length) for c in ns.candidates)
    kept = ns.candidates[ns.chosen]
    out.append(f"lengths tried: {tried}; kept: {kept.length} (best mean log-probability {kept.score:.3f})")
    for n, p in enumerate(kept.passes):
        what = (f"all {kept.length} positions are start tokens {piece(ns.mask_id)!r}, written at once" if n == 0 else
                f"re-masked {len(p.masked)}: positions {', '.join(str(i + 1) for i in p.masked) or 'none'}")
        out.append(f"  pass {n + 1}: {what}")
        out.append("    " + " ".join(f"{piece(t)}{'*' if i in p.masked else ''}" for i, t in enumerate(p.tokens)))
    out.append(f"  (* written on that pass)  -> {text(ns.tokens)}")
    return out


def read_steps_html(path: str | os.PathLike) -> dict:
    """The data of a page written by ``steps_html`` or ``nat_steps_html`` (kind "ar" or "nat")."""
    d = read_page_data(path, what="a page written by steps_html")
    if d.get("kind") not in ("ar", "nat"):
        raise ValueError(f"{path} is not a page written by steps_html")
    return d
