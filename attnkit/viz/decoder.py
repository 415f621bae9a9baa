"""The decoder, seen: one translation's three kinds of attention as three tabs of one page (bertviz's
encoder / decoder / cross tabs for encoder-decoder models).

- encoder self-attention: every source piece looks at every source piece;
- decoder self-attention: masked in an autoregressive model (position i sees the decoder's inputs 1..i, the
  later ones do not exist yet when it writes: the masked triangle, grey, weight 0), unmasked in a NAT model
  (every position written at once sees every other);
- cross-attention: each target position looks at the source (queries from the decoder, keys and values from
  the encoder's output).

``decoder_attention(model, run)`` runs ``run()`` once (the model over one translation, the whole target at
once: teacher-forced, the same weights as decoding step by step), captures every attention call's inputs
(``heads.capture_attention``, nothing kept on the model) and computes each layer's weights with
``attnkit.explain`` from the call's own q, k, v and mask (``heads.explain_layer``). ``decoder_html`` writes the
page with the attention page's own view (``static/attention.js``) drawn for the tab chosen.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from .heads import AttentionCall, call_mask, capture_attention, explain_layer, head_parts
from .html import SCRIPTS, SMALL, _first_word, _weights, attention_body
from .lecture import lecture_html
from .page import pack, read_page_data, unpack, write_page

__all__ = ["DecoderAttention", "decoder_attention", "decoder_html", "decoder_positions", "decoder_lecture_html",
           "read_decoder_html"]

KINDS = ("encoder", "decoder", "cross")


@dataclass
class DecoderAttention:
    encoder: Tensor  # (encoder layers, H, S, S)
    decoder: Tensor  # (decoder layers, H, T, T)
    cross: Tensor  # (decoder layers, H, T, S)
    decoder_mask: Tensor | None  # (T, T) bool, True = may attend; None: every position sees every other


@torch.no_grad()
def decoder_attention(model: nn.Module, run: Callable[[], object]) -> DecoderAttention:
    """The weights of every attention layer of an encoder-decoder ``model`` (with ``encoder`` and ``decoder``
    submodules) while ``run()`` runs it once on one sentence (batch row 0)."""
    calls = capture_attention(model, run)
    in_encoder = {id(m) for m in model.encoder.modules()}
    found: dict[str, list[Tensor]] = {k: [] for k in KINDS}
    masks: dict[str, Tensor | None] = {}
    for c in calls:
        kind = "encoder" if id(c.module) in in_encoder else ("decoder" if c.key is c.query else "cross")
        found[kind].append(_weights_of(c))  # (H, Lq, Lk)
        masks.setdefault(kind, call_mask(c))
    missing = [k for k in KINDS if not found[k]]
    if missing:
        raise ValueError(f"decoder_attention: no {' or '.join(missing)} attention call while running the model")
    return DecoderAttention(*(torch.stack(found[k]) for k in KINDS), masks["decoder"])


def _weights_of(c: AttentionCall) -> Tensor:
    """One call's weights (H, Lq, Lk) of batch row 0: attnkit.explain on its own q, k, v and mask; for positions
    that add a bias to the scores (ALiBi, relative), which the lecture's q . k chain leaves out, the module's own
    ``need_weights`` call on the same inputs."""
    try:
        return explain_layer(head_parts(c))[0].weights
    except ValueError:
        key = None if c.key is c.query else c.key
        return c.module(c.query, key, None if key is None else c.value, mask=c.mask, need_weights=True).weights[0]


_TABS = """<div class="tabs" id="tabs"></div><p class="note" id="tab-note"></p>"""

_NOTES = {
    "encoder": "The encoder's self-attention: every source piece (query) looks at every source piece (key), "
               "nothing masked.",
    "causal": "The decoder's masked self-attention: row i is the decoder at position i, labelled input\u2192output "
              "as in the cross-attention tab (its input: the start token, then each token it wrote, fed back; its "
              "output: the token it writes). It sees its own input and the earlier ones only: the later keys are "
              "masked (grey, the triangle above the diagonal), \u03b1' = 0, because when position i writes its token "
              "the later ones do not exist yet.",
    "parallel": "The decoder's self-attention in a non-autoregressive model is not masked: every position is "
                "written at once, so each sees every other (no future to hide). The labels are the translation's "
                "tokens, the decoder's input on its last Mask-Predict pass.",
    "cross": "Cross-attention: queries from the decoder (a row per target position, labelled as in the decoder "
             "tab: its input\u2192the token it writes), keys and values from the encoder's output (a column per "
             "source piece).",
}


def _tab(name: str, w, queries, keys, mask, sides, left, layer_word, note) -> dict:
    w = _weights(w, "decoder_html")
    n, _, lq, lk = w.shape
    if len(queries) != lq or len(keys) != lk:
        raise ValueError(f"decoder_html: {name}: {len(queries)} query labels and {len(keys)} key labels for weights "
                         f"of shape {tuple(w.shape)}")
    return {"name": name, "note": note, "queries": queries, "keys": keys, "sides": list(sides), "left": left,
            "layer_names": [f"{layer_word} layer {i + 1}" for i in range(n)], "pin": _first_word(queries),
            "mask": None if mask is None else pack(torch.as_tensor(mask).float(), decimals=0),
            "weights": pack(w, decimals=4 if w.size <= SMALL else 3)}


def decoder_html(att: DecoderAttention, source: Sequence[str], inputs: Sequence[str], outputs: Sequence[str],
                 path: str | os.PathLike, *, title: str = "encoder, decoder and cross-attention",
                 first: str = "decoder") -> Path:
    """Write the three tabs' page and return its path. ``source`` (S) labels the source pieces, ``inputs`` (T) the
    decoder's input at each position (start token, then the tokens fed back; a NAT model's: its tokens),
    ``outputs`` (T) the token each position writes. ``first``: the tab shown when the page opens."""
    src, inp, out = ([str(t) for t in x] for x in (source, inputs, outputs))
    if len(inp) != len(out):
        raise ValueError(f"decoder_html: {len(inp)} decoder inputs but {len(out)} outputs")
    if first not in KINDS:
        raise ValueError(f"decoder_html: `first` must be one of {KINDS}, got {first!r}")
    causal = att.decoder_mask is not None and bool((~att.decoder_mask).any())
    positions = decoder_positions(inp, out)  # one label per decoder position, the same in both of its tabs
    tabs = [_tab("encoder self-attention", att.encoder, src, src, None, ("source (query)", "source (key)"), "queries",
                 "encoder", _NOTES["encoder"]),
            _tab("decoder self-attention" + (" (masked)" if causal else " (not masked)"), att.decoder, positions,
                 positions,
                 att.decoder_mask if causal else None, ("target (query)", "target (key)"), "queries", "decoder",
                 _NOTES["causal" if causal else "parallel"]),
            _tab("cross-attention", att.cross, positions, src, None, ("target (query)", "source (key)"), "keys",
                 "decoder", _NOTES["cross"])]
    data = {"title": str(title), "tabs": tabs, "first": KINDS.index(first), "causal": causal}
    return write_page(path, title=title, body='<h2 id="title"></h2>' + _TABS + attention_body().split("\n", 1)[1],
                      scripts=[*SCRIPTS[:-1], "decoder.js"], data=data)


def decoder_positions(inputs: Sequence[str], outputs: Sequence[str]) -> list[str]:
    """A decoder position's label, one in every tab: ``input\u2192output`` (``<s>\u2192_A``, ``_A\u2192_man``), or
    the token alone where each position's input is its output (a NAT model's last pass)."""
    if list(inputs) == list(outputs):
        return list(outputs)
    return [f"{i}\u2192{o}" for i, o in zip(inputs, outputs)]


@torch.no_grad()
def decoder_lecture_html(model: nn.Module, run: Callable[[], object], inputs: Sequence[str], path: str | os.PathLike,
                         *, title: str = "the decoder's self-attention, step by step") -> Path:
    """The lecture page (``viz.lecture``) of the decoder's self-attention layers while ``run()`` runs ``model`` once
    (``inputs``: the decoder's input tokens): in an autoregressive model a query's later keys read "masked" and
    get alpha' = 0, and the page says so."""
    calls = capture_attention(model, run)
    in_decoder = {id(m) for m in model.decoder.modules()}
    parts = [head_parts(c) for c in calls if id(c.module) in in_decoder and c.key is c.query]
    if not parts:
        raise ValueError("decoder_lecture_html: no decoder self-attention call while running the model")
    masked = parts[0].mask is not None
    notes = ("The decoder's self-attention: q^i is the decoder at position i, whose input is token i (the start "
             "token, then each token written and fed back). " + (
                 "It is masked: q^i sees k^1..k^i only, a later key is a token not written yet (alpha' = 0)."
                 if masked else "It is not masked: a NAT model writes every position at once."))
    return lecture_html(parts, inputs, path, title=title, notes=notes,
                        layer_names=[f"decoder self-attention layer {i + 1}" for i in range(len(parts))])


def read_decoder_html(path: str | os.PathLike) -> dict:
    """The data of a page written by ``decoder_html``: title, causal and ``tabs`` (each with name, queries, keys,
    weights (N, H, Lq, Lk) and mask (Lq, Lk) or None, unpacked as the page shows them)."""
    d = read_page_data(path, what="a page written by decoder_html")
    if "tabs" not in d:
        raise ValueError(f"{path} is not a page written by decoder_html")
    for t in d["tabs"]:
        t["weights"] = unpack(t["weights"])
        t["mask"] = None if t["mask"] is None else unpack(t["mask"])
    return d
