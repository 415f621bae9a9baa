"""The lecture's matrices, literally: A = Q K^T * scale (+ bias), A' = softmax(A), O = A' V.

This is the reference every other backend is tested against, and the definition of the NaN / inf
policy (``attnkit.functional.attention``): hidden scores are replaced by -inf (never added to), a query
with no key (or only -inf scores) gets zero weights (``scores.masked_softmax``), and no hidden value is
multiplied in, not even by 0 (``policy.visible_product``). Those two cost passes over the scores, so
they run only when the output is not finite (one sum); finite outputs come from the plain formula.
Rows are queries (the lecture's column-per-query layout, transposed). In bfloat16 the two products run
in that dtype and the scores are scaled, biased and normalised in float32; float16 scores are computed
in float32 as well (float16 overflows at 65504).
Takes everything: any mask, bias, dtype, device (also meta), autograd, dropout, and returns weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..bias import materialize_bias
from ..masks import Mask
from ..policy import finite, visible_product
from ..scores import masked_softmax
from . import Backend, register_backend

LOW_PRECISION = (torch.bfloat16, torch.float16)


def scores_of(q: Tensor, k: Tensor) -> Tensor:
    """Q K^T (..., Lq, Lk), in float32 for float16 inputs (whose products overflow at 65504)."""
    if q.dtype == torch.float16:
        return q.float() @ k.float().transpose(-2, -1)
    return q @ k.transpose(-2, -1)


def math_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | None,
                   scale: float, dropout_p: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    lq, lk = q.shape[-2], k.shape[-2]
    work = torch.float32 if q.dtype in LOW_PRECISION else q.dtype
    scores = scores_of(q, k).to(work) * scale  # A = K^T Q, one row per query: (..., Lq, Lk)
    if bias is not None:
        scores = scores + materialize_bias(bias, lq, lk, q.device, work, q.dim())  # Bias: (H|1, Lq, Lk)
    dense = None if mask is None else mask.materialize(lq, lk, q.dim(), q.device)
    weights = _softmax(scores, dense).to(q.dtype)  # A': (..., Lq, Lk), empty rows all zero
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = dropped @ v  # O: (..., Lq, dv)
    if not finite(out) or (need_weights and not finite(weights)):  # a NaN / inf somewhere: the policy, slowly
        weights = masked_softmax(scores, dense).to(q.dtype)  # rows of -inf scores: zeros
        dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
        out = visible_product(dropped, v, dense)  # 0 * a hidden NaN / inf never enters
    return out, (weights if need_weights else None)


def _softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """``masked_softmax`` for finite scores, a pass cheaper: a row with no key attends everywhere (then
    zeroed) instead of being looked for in the scores. A row of -inf scores gives NaN here, never silently."""
    if mask is None:
        return scores.softmax(-1)
    live = mask.any(-1, keepdim=True)  # (..., Lq | 1, 1): rows with a key
    weights = scores.masked_fill(~(mask | ~live), float("-inf")).softmax(-1)
    return torch.where(live, weights, 0.0)


register_backend(Backend(
    "math", math_attention, "the reference: dense scores, masked softmax, weights @ values",
    weights=True, meta=True))
