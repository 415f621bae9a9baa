"""Autoregressive decoding step by step, as the lecture draws it (BOS -> 机 -> 器 -> 学 -> 习 -> END): at each step
the decoder's input row (the start token and every token chosen so far, fed back), the most likely next tokens with
their probabilities, and the one chosen. Forcing another token at a step shows what the rest becomes ("one wrong
step, every step wrong").

``walk(model, memory, mask, ids, ...)`` is ``search.greedy_or_sample``'s own loop (the model's ``decode_step`` with
its K/V cache, ``logits.constrain``'s rules: suppressed ids never chosen) with a hook (``search.OnStep``) that notes
each step's candidates and writes the forced tokens, so the free walk is the translation greedy decoding gives.
``prefix`` forces the first tokens (a forced step still shows the model's own candidates there).
``autoregressive_steps`` makes the free walk, each listed candidate's continuation (the candidate forced at its
step, greedy after) and the walks of ``force`` ({step: token id}). The page: ``attnkit.viz.steps_page``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .protocol import TokenIds
from .search import greedy_or_sample

__all__ = ["Step", "Steps", "walk", "autoregressive_steps"]

ALTERNATIVES_UP_TO = 40  # steps of the free walk whose candidates get a continuation


@dataclass
class Step:
    chosen: int  # the token written at this step and fed back
    prob: float  # the model's probability of it
    top: list[tuple[int, float]]  # the most likely tokens (id, probability), best first; suppressed ids never
    forced: bool = False  # chosen by the user, not by the model


@dataclass
class Steps:
    start: int  # the decoder's first input (the start token)
    free: list[Step]  # greedy decoding
    alternatives: dict[tuple[int, int], list[Step]] = field(default_factory=dict)  # (step, token) -> that walk
    forced: list[tuple[dict[int, int], list[Step]]] = field(default_factory=list)  # ({step: token}, the walk)

    @staticmethod
    def tokens(walk: list[Step]) -> list[int]:
        return [s.chosen for s in walk]


class _Record:
    """``greedy_or_sample``'s ``on_step`` for one sentence: notes each step's candidates (their probabilities after
    the rules) and the token written, the token of ``force`` where it names the step."""

    def __init__(self, candidates: int, force: dict[int, int]):
        self.candidates, self.force, self.steps = candidates, force, []

    def __call__(self, step: int, rows: Tensor, logp: Tensor, chosen: Tensor) -> Tensor:
        logp = logp[0]  # (V,)
        best = logp.topk(min(self.candidates, logp.shape[0]))
        top = [(int(i), float(p)) for i, p in zip(best.indices, best.values.exp()) if p > 0]
        forced = step in self.force
        token = self.force[step] if forced else int(chosen[0])
        self.steps.append(Step(token, float(logp[token].exp()), top, forced))
        return chosen.new_tensor([token])


@torch.no_grad()
def walk(model, memory: Tensor, mask: Tensor | None, ids: TokenIds, *, max_new_tokens: int,
         suppress: Tensor | None = None, candidates: int = 5, prefix: list[int] = (),
         force: dict[int, int] | None = None, forced_eos: int | None = None, renormalize: bool = False
         ) -> list[Step]:
    """Greedy decoding of one sentence (memory (1, S, d), mask (1, S) or None) step by step; the tokens of
    ``prefix`` are written at steps 0, 1, ... and ``force`` {step: token} at its steps, the model's choice elsewhere.
    Stops after END or ``max_new_tokens`` steps. ``forced_eos`` and ``renormalize``: ``generate``'s
    ``forced_eos_token_id`` (the last step's token) and ``renormalize_logits``."""
    record = _Record(candidates, {**{i: t for i, t in enumerate(prefix)}, **(force or {})})
    greedy_or_sample(model, memory, mask, ids, max_new_tokens=max_new_tokens, min_new_tokens=0, suppress=suppress,
                     use_cache=True, output_attentions=False, length_penalty=1.0, forced_eos=forced_eos,
                     renormalize=renormalize, on_step=record)
    return record.steps


def autoregressive_steps(model, memory: Tensor, mask: Tensor | None, ids: TokenIds, *, max_new_tokens: int,
                         suppress: Tensor | None = None, candidates: int = 5,
                         force: list[dict[int, int]] = (), forced_eos: int | None = None,
                         renormalize: bool = False) -> Steps:
    """The free (greedy) walk, the continuation of every listed candidate of its first ``ALTERNATIVES_UP_TO``
    steps (at most 2 x the free walk's length + 10 steps in all), and one walk for each entry of ``force``
    ({step (0 = the first token): token id})."""
    kw = {"max_new_tokens": max_new_tokens, "suppress": suppress, "candidates": candidates, "renormalize": renormalize}
    free = walk(model, memory, mask, ids, forced_eos=forced_eos, **kw)  # the greedy translation, token for token
    chosen = Steps.tokens(free)
    alternatives = {}
    short = {**kw, "max_new_tokens": min(max_new_tokens, 2 * len(free) + 10)}  # previews: no END forced at their end
    for t, s in enumerate(free[:ALTERNATIVES_UP_TO]):
        for tok, _ in s.top:
            if tok != s.chosen:
                alternatives[(t, tok)] = walk(model, memory, mask, ids, prefix=[*chosen[:t], tok], **short)[t:]
    forced = [(f, walk(model, memory, mask, ids, force=f, forced_eos=forced_eos, **kw)) for f in force]
    return Steps(ids.start, free, alternatives, forced)
