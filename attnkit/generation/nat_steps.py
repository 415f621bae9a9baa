"""Non-autoregressive decoding seen pass by pass: the length chosen, the row of start (mask) tokens, every token
written at once, and each Mask-Predict iteration's re-masked tokens and what they became.

``nat_steps(model, input_ids, mask, ...)`` runs ``attnkit.generation.mask_predict`` itself on a recorder of the
model: an object that passes every call on to the model and notes the rows the decoder is given
(``decode_parallel``'s tokens: the mask token where a position is to be predicted) and the logits it gives back
for them (``output_logits``). Nothing is kept on the model and the decoding is mask_predict's own, so the last
pass is the translation ``mask_predict`` returns (the tests check it). Each prediction is the most likely allowed
token (pad, the mask token, the ``suppress_tokens`` and, with a length classifier, END never written: the rule
of mask_predict's module doc) with its probability. The page: ``attnkit.viz.steps_page``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .mask_predict import mask_predict

__all__ = ["Pass", "Candidate", "NATSteps", "nat_steps"]


@dataclass
class Pass:
    masked: list[int]  # the positions given the mask token (to predict) on this pass, 0-based
    tokens: list[int]  # the row after the pass (T)
    probs: list[float]  # each token's probability when it was written (T)


@dataclass
class Candidate:
    length: int  # T
    passes: list[Pass]
    score: float  # mean log-probability of its tokens (the best candidate wins)


@dataclass
class NATSteps:
    mask_id: int  # the decoder's input at a position to predict (the start token unless the model has its own)
    lengths: list[tuple[int, int, float]]  # the length classifier's most likely classes: (S + offset, that length
    # clamped to [1, the longest row] as decoded, probability); [] for a model that cuts at END
    candidates: list[Candidate]  # the lengths tried, in the classifier's order
    chosen: int  # the index of the candidate kept
    tokens: list[int]  # the translation's tokens (mask_predict's output, END not included)


class _Recorder:
    """The model, passed through; ``decode_parallel``'s rows and ``output_logits``' results are noted."""

    def __init__(self, model):
        self._model, self.rows, self.logits = model, [], []

    def __getattr__(self, name):
        return getattr(self._model, name)

    def decode_parallel(self, tokens, *args, **kwargs):
        self.rows.append(tokens.clone())
        return self._model.decode_parallel(tokens, *args, **kwargs)

    def output_logits(self, hidden):
        out = self._model.output_logits(hidden)
        self.logits.append(out.float())
        return out


def _never(cfg, suppress: list[int]) -> list[int]:
    return sorted({cfg.pad_token_id, cfg.mask_id, *suppress} | ({cfg.eos_token_id} if cfg.length == "classifier"
                                                                   else set()))


def _passes(rec: _Recorder, cfg, never: list[int], lengths: Tensor) -> list[list[Pass]]:
    """Per candidate row, its passes: the positions masked (the mask token in the row given), the tokens written."""
    rows_n = rec.rows[0].shape[0]
    tokens = torch.full_like(rec.rows[0], cfg.pad_token_id)
    probs = torch.zeros(rec.rows[0].shape)
    out: list[list[Pass]] = [[] for _ in range(rows_n)]
    for given, logits in zip(rec.rows, rec.logits):
        real = torch.arange(given.shape[1])[None, :] < lengths[:, None]  # (R, T)
        masked = (given == cfg.mask_id) & real
        logp = logits.log_softmax(-1)
        logp[:, never] = float("-inf")
        if logp.shape[0] == given.numel():  # the first pass of full rows: every position's logits
            logp = logp.view(*given.shape, -1)[masked]
        best = logp.max(-1)
        tokens = given.masked_scatter(masked, best.indices)
        probs = probs.masked_scatter(masked, best.values.exp())
        for r in range(rows_n):
            n = int(lengths[r])
            out[r].append(Pass(masked[r].nonzero().view(-1).tolist(), tokens[r, :n].tolist(), probs[r, :n].tolist()))
    return out


@torch.no_grad()
def nat_steps(model, input_ids: Tensor, attention_mask: Tensor | None = None, *, iterations: int = 10,
              length_candidates: int | None = None, suppress_tokens: list[int] = (), top_lengths: int = 5) -> NATSteps:
    """One sentence (input_ids (1, S)) decoded by ``mask_predict`` with these options, pass by pass."""
    if input_ids.shape[0] != 1:
        raise ValueError(f"nat_steps: one sentence at a time, got {input_ids.shape[0]}")
    cfg = model.config
    rec = _Recorder(model)
    res = mask_predict(rec, input_ids, attention_mask, iterations=iterations, length_candidates=length_candidates,
                       suppress_tokens=list(suppress_tokens))
    lengths = res.candidate_lengths[0]  # (k,)
    passes = _passes(rec, cfg, _never(cfg, list(suppress_tokens)), lengths)
    n = int(res.lengths[0]) - 1  # the tokens before END
    final = res.sequences[0, 1:1 + n].tolist()
    cands = [Candidate(int(t), p, sum(torch.tensor(p[-1].probs).log().tolist()) / max(1, int(t)))
             for t, p in zip(lengths, passes)]
    chosen = next(i for i, c in enumerate(cands)  # the row mask_predict kept ("end": its tokens before END)
                  if c.passes[-1].tokens[:n] == final and (cfg.length == "end" or c.length == n))
    shown = []
    if cfg.length == "classifier":
        memory = model.encode(input_ids, attention_mask)
        p = model.length_logits(memory, attention_mask).float().softmax(-1)[0]  # (2m + 1,) over T - S
        src = int(model.source_lengths(attention_mask, memory)[0])
        best = p.topk(min(top_lengths, p.shape[0]))
        raw = [src + int(i) - cfg.max_length_offset for i in best.indices]
        shown = [(t, min(max(t, 1), cfg.max_target_length), float(v)) for t, v in zip(raw, best.values)]
    return NATSteps(cfg.mask_id, shown, cands, chosen, final)
