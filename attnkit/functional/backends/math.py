"""The lecture's matrices, literally: A = Q K^T * scale (+ bias), A' = softmax(A), O = A' V.

This is the reference every other backend is tested against. Rows are queries (the lecture's
column-per-query layout, transposed).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from ..bias import materialize_bias
from ..masks import Mask
from ..scores import masked_softmax
from . import Backend, register_backend


def math_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | None,
                   scale: float, dropout_p: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    lq, lk = q.shape[-2], k.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * scale  # A: (..., Lq, Lk)
    if bias is not None:
        scores = scores + materialize_bias(bias, lq, lk, q.device, q.dtype, q.dim())  # Bias: (H|1, Lq, Lk)
    dense = None if mask is None else mask.materialize(lq, lk, q.dim(), q.device)
    weights = masked_softmax(scores, dense)  # A': (..., Lq, Lk), empty rows all zero
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = dropped @ v  # O: (..., Lq, dv)
    return out, (weights if need_weights else None)


register_backend(Backend("math", math_attention, supports_weights=True, priority=-100))
