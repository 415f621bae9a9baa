"""The lecture's matrices, literally: A = Q K^T * scale (+ bias), A' = softmax(A), O = A' V.

This is the reference every other backend is tested against. Rows are queries (the lecture's
column-per-query layout, transposed). In bfloat16/float16 the two products run in that dtype and the
scores are scaled, biased and normalised in float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..bias import materialize_bias
from ..masks import Mask
from ..scores import masked_softmax
from . import Backend, register_backend

LOW_PRECISION = (torch.bfloat16, torch.float16)


def math_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | None,
                   scale: float, dropout_p: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    lq, lk = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1)  # K^T Q, one row per query: (..., Lq, Lk)
    work = torch.float32 if q.dtype in LOW_PRECISION else q.dtype
    scores = scores.to(work) * scale  # A
    if bias is not None:
        scores = scores + materialize_bias(bias, lq, lk, q.device, work, q.dim())  # Bias: (H|1, Lq, Lk)
    dense = None if mask is None else mask.materialize(lq, lk, q.dim(), q.device)
    weights = masked_softmax(scores, dense).to(q.dtype)  # A': (..., Lq, Lk), empty rows all zero
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = dropped @ v  # O: (..., Lq, dv)
    return out, (weights if need_weights else None)


register_backend(Backend("math", math_attention, supports_weights=True, priority=-100))
