"""Score functions and normalisers the lectures name, as pure functions.

Shapes: q (..., Lq, dq), k (..., Lk, dk); scores (..., Lq, Lk) with rows = queries.
(The lecture writes A = K^T Q with one *column* per query; ours is its transpose, the
batch-first layout every kernel uses.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = [
    "dot_scores", "scaled_dot_scores", "additive_scores",
    "masked_softmax", "masked_relu", "masked_sigmoid", "NORMALIZERS",
]


def dot_scores(q: Tensor, k: Tensor) -> Tensor:
    """alpha_ij = q_i . k_j  ->  (..., Lq, Lk)."""
    return q @ k.transpose(-2, -1)


def scaled_dot_scores(q: Tensor, k: Tensor, scale: float | None = None) -> Tensor:
    """alpha_ij = q_i . k_j / sqrt(d)  (or times ``scale``)  ->  (..., Lq, Lk)."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return (q @ k.transpose(-2, -1)) * scale


def additive_scores(q: Tensor, k: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor) -> Tensor:
    """Additive (Bahdanau) scores: alpha_ij = w_v . tanh(W_q q_i + W_k k_j).

    q (..., Lq, dq), k (..., Lk, dk), w_q (h, dq), w_k (h, dk), w_v (h,)  ->  (..., Lq, Lk).
    """
    qh = q @ w_q.transpose(0, 1)  # (..., Lq, h)
    kh = k @ w_k.transpose(0, 1)  # (..., Lk, h)
    feats = torch.tanh(qh.unsqueeze(-2) + kh.unsqueeze(-3))  # (..., Lq, Lk, h)
    return feats @ w_v  # (..., Lq, Lk)


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over keys, True = may attend. Hidden scores are replaced by -inf (whatever they hold); a -inf
    score is a weight of 0, and a row with no allowed key, or only -inf scores, gets all-zero weights (never
    NaN, and zero gradient). A NaN or +inf score a row may see makes that row NaN."""
    dtype = scores.dtype
    work = scores.float() if dtype in (torch.float16, torch.bfloat16) else scores
    if mask is not None:
        work = work.masked_fill(~mask, float("-inf"))
    live = (work != float("-inf")).any(-1, keepdim=True)  # (..., Lq, 1): a weight that is not 0 (or NaN)
    weights = torch.where(live, work, 0.0).softmax(-1)  # dead rows: a harmless uniform row, zeroed below
    return torch.where(live, weights, 0.0).to(dtype)


def masked_relu(scores: Tensor, mask: Tensor | None) -> Tensor:
    """ReLU in place of softmax (the lecture's alternative): weights = max(alpha, 0), masked to 0."""
    w = torch.relu(scores)
    return w if mask is None else torch.where(mask, w, 0.0)


def masked_sigmoid(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Sigmoid normalisation: each weight in (0, 1) independently, masked to 0."""
    w = torch.sigmoid(scores)
    return w if mask is None else torch.where(mask, w, 0.0)


NORMALIZERS: dict[str, Callable[[Tensor, Tensor | None], Tensor]] = {
    "softmax": masked_softmax,
    "relu": masked_relu,
    "sigmoid": masked_sigmoid,
}
