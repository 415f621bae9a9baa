"""Band attention: each query sees the keys of its window only, in O(L * window) time and memory.

The pieces, one concept a file: ``geometry`` (query blocks, their key bands, padded buffers),
``forward`` (the native, fused and blocked forwards), ``autograd`` (the recomputing backward),
``dropout`` (the differentiable path with dropout on the weights). ``band_attention`` is the entry
the ``local`` backend calls.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ...masks import lengths_per_row
from .autograd import BandFn
from .dropout import band_dropout

__all__ = ["band_attention"]


def band_attention(q: Tensor, k: Tensor, v: Tensor, left: int, right: int, lengths: Tensor | None, scale: float,
                   dropout_p: float = 0.0) -> Tensor:
    """Keys [i - left, i + right] of each query (aligned to the end of the keys), the first
    ``lengths[b]`` keys of batch row b: q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv).
    bfloat16 / float16 inputs are computed in float32 and cast back."""
    lead, lq, lk = tuple(q.shape[:-2]), q.shape[-2], k.shape[-2]
    dtype = q.dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    n = math.prod(lead)
    qf = q.reshape(n, lq, q.shape[-1]).to(work)  # (N, Lq, d)
    kf = k.reshape(n, lk, k.shape[-1]).to(work)  # (N, Lk, d)
    vf = v.reshape(n, lk, v.shape[-1]).to(work)  # (N, Lk, dv)
    rows = lengths_per_row(None if lengths is None else lengths.to(q.device), lead)  # (N,) or None
    if dropout_p > 0:
        out = band_dropout(qf, kf, vf, rows, left, right, scale, dropout_p)
    else:
        out = BandFn.apply(qf, kf, vf, rows, left, right, scale)
    return out.to(dtype).reshape(*lead, lq, v.shape[-1])  # (..., Lq, dv)
