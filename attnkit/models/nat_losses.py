"""Training objectives of the one-pass NAT decoder beside Mask-Predict: glancing training and CTC.

Glancing training (GLAT; Qian et al. 2021, "Glancing Transformer for Non-Autoregressive Neural Machine
Translation"): a first pass over a row of mask tokens, without gradients, is compared with the reference;
its Hamming distance d (positions it got wrong) sets how many reference tokens the second pass sees:
floor(ratio x d), at positions chosen uniformly. The second pass (with gradients) predicts the others, and
only they are scored. A model that already writes the sentence in one pass sees nothing; a wrong one is
helped, so the model learns the dependencies between target tokens step by step and decodes in one pass.
The ratio is constant here (the paper anneals it from 0.5 to 0.3; not done).

CTC (Libovický and Helcl 2018; Gu and Kong 2021): the decoder's input is ceil(``ctc_upsample`` x S) mask tokens
(S source tokens), every row position writes a token or the blank (the pad id, never a target token), and
the loss sums over every alignment of the target to the row (``F.ctc_loss``). The output length is what the
alignment leaves after merging repeats and dropping blanks: no length classifier. A target the row cannot
align (its T tokens plus one blank between equal neighbours are more than the row) has probability 0;
``zero_infinity`` makes its loss 0 (no gradient), and ``ctc_feasible`` counts such targets.

- ``glance_reveal(predicted, rows, lengths, ratio)`` -> revealed (B, W) bool;
- ``glat_logits(model, src, mask, rows, lengths, ratio)`` -> (logits (M, V) of the unrevealed positions, their
  mask (B, W), memory);
- ``ctc_logits(model, src, mask)`` -> (log-probabilities (B, W, V), row lengths (B,));
- ``ctc_loss(...)``, ``ctc_feasible(targets, lengths, rows)``, ``best_path(...)``: the CTC pieces; ``best_path``
  (the most likely alignment, Viterbi) labels each row position for a frame-level dev score.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional.masks import keep_positions
from .nat import NATModel, choose_positions

__all__ = ["glance_reveal", "glat_logits", "ctc_logits", "ctc_loss", "ctc_feasible", "best_path", "IGNORE"]

IGNORE = -100  # a position with no label (the training engine's IGNORE)


def glance_reveal(predicted: Tensor, rows: Tensor, lengths: Tensor, ratio: float,
                  generator: torch.Generator | None = None) -> Tensor:
    """predicted (B, W), reference rows (B, W), lengths (B,) -> revealed (B, W) bool: per row floor(ratio x d)
    of its first ``lengths[b]`` positions, chosen uniformly, d the positions where predicted != reference."""
    width = rows.shape[1]
    wrong = ((predicted != rows) & keep_positions(lengths, width)).sum(1)  # (B,) Hamming distance
    n = (wrong.double() * ratio).floor().long()  # (B,)
    return choose_positions(n, lengths, width, generator)


def glat_logits(model: NATModel, src: Tensor, mask: Tensor, rows: Tensor, lengths: Tensor, ratio: float,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Glancing training's two passes: src (B, S), mask (B, S), reference rows (B, W), lengths (B,) ->
    (logits (M, V) at the M positions left masked, those positions (B, W) bool, memory (B, S, d))."""
    mask_id = model.config.mask_id
    real = keep_positions(lengths, rows.shape[1])  # (B, W)
    memory = model.encode(src, mask)  # (B, S, d)
    with torch.no_grad():  # the first pass: every position masked, no gradient
        hidden = model.decode_parallel(rows.masked_fill(real, mask_id), memory, mask, lengths).last_hidden_state
        predicted = model.output_logits(hidden).argmax(-1)  # (B, W)
    masked = real & ~glance_reveal(predicted, rows, lengths, ratio, generator)  # (B, W) still to predict
    hidden = model.decode_parallel(rows.masked_fill(masked, mask_id), memory, mask, lengths).last_hidden_state
    return model.output_logits(hidden[masked]), masked, memory  # (M, V)


def ctc_logits(model: NATModel, src: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """The decoder over ceil(``ctc_upsample`` x S) mask tokens: src (B, S), mask (B, S) -> (log-probabilities
    (B, W, V) float32, row lengths (B,)); positions past a row's length are padding."""
    cfg = model.config
    memory = model.encode(src, mask)  # (B, S, d)
    rows = model.ctc_rows(mask, memory)  # (B,)
    width = int(rows.max())
    tokens = torch.full((src.shape[0], width), cfg.mask_id, dtype=torch.long, device=src.device)
    tokens = tokens.masked_fill(~keep_positions(rows, width), cfg.pad_token_id)  # (B, W)
    hidden = model.decode_parallel(tokens, memory, mask, rows).last_hidden_state  # (B, W, d)
    return model.output_logits(hidden).float().log_softmax(-1), rows


def ctc_loss(log_probs: Tensor, rows: Tensor, targets: Tensor, target_lengths: Tensor, blank: int) -> Tensor:
    """CTC over the targets: log_probs (B, W, V), rows (B,), targets (B, L) (padded), target_lengths (B,) -> the
    mean over the batch of each target's negative log-likelihood divided by its length; 0 for a target the row
    cannot align (``zero_infinity``)."""
    return F.ctc_loss(log_probs.transpose(0, 1), targets, rows, target_lengths, blank=blank, reduction="mean",
                      zero_infinity=True)


def ctc_feasible(targets: Tensor, target_lengths: Tensor, rows: Tensor) -> Tensor:
    """(B,) bool: can a row of ``rows[b]`` positions align target b (its tokens plus one blank between equal
    neighbours)? targets (B, L) padded, lengths (B,)."""
    same = (targets[:, 1:] == targets[:, :-1]) & keep_positions(target_lengths - 1, max(targets.shape[1] - 1, 0))
    return target_lengths + same.sum(1) <= rows


def best_path(log_probs: Tensor, rows: Tensor, targets: Tensor, target_lengths: Tensor, blank: int) -> Tensor:
    """The most likely CTC alignment (Viterbi): log_probs (B, W, V), rows (B,), targets (B, L), lengths (B,) ->
    each row position's label (B, W) int64 (a target token or the blank), ``IGNORE`` past the row and for a
    target the row cannot align."""
    b, w, _ = log_probs.shape
    ext = torch.full((b, 2 * targets.shape[1] + 1), blank, dtype=torch.long, device=targets.device)
    ext[:, 1::2] = targets.masked_fill(~keep_positions(target_lengths, targets.shape[1]), blank)  # (B, K)
    k = ext.shape[1]
    emit = log_probs.gather(2, ext[:, None, :].expand(b, w, k))  # (B, W, K)
    skip = (ext != blank) & F.pad(ext[:, 2:] != ext[:, :-2], (2, 0), value=False)  # (B, K) s-2 -> s allowed
    neg = torch.finfo(emit.dtype).min
    alpha = torch.full((b, k), neg, dtype=emit.dtype, device=emit.device)
    alpha[:, :2] = emit[:, 0, :2]
    back = torch.zeros(b, w, k, dtype=torch.long, device=emit.device)  # (B, W, K) states stepped back
    for t in range(1, w):
        one = F.pad(alpha[:, :-1], (1, 0), value=neg)
        two = F.pad(alpha[:, :-2], (2, 0), value=neg).masked_fill(~skip, neg)
        best, arg = torch.stack((alpha, one, two), dim=-1).max(-1)  # (B, K)
        live = (t < rows)[:, None]  # rows already ended keep their last column
        alpha = torch.where(live, best + emit[:, t], alpha)
        back[:, t] = arg
    last = 2 * target_lengths  # (B,) the final blank; the final token is last - 1
    ends = torch.stack((alpha.gather(1, last[:, None]), alpha.gather(1, (last - 1).clamp(min=0)[:, None])), 1)
    ends = ends.squeeze(2)  # (B, 2)
    state = torch.where((ends[:, 1] > ends[:, 0]) & (target_lengths > 0), last - 1, last)  # (B,)
    ok = ends.max(1).values > neg / 2  # some alignment exists
    labels = torch.full((b, w), IGNORE, dtype=torch.long, device=emit.device)
    for t in reversed(range(w)):
        live = t < rows
        labels[:, t] = torch.where(live & ok, ext.gather(1, state[:, None]).squeeze(1), IGNORE)
        state = torch.where(live, state - back[:, t].gather(1, state[:, None]).squeeze(1), state)
    return labels
