"""Backend "local": truncated (sliding-window) attention in O(L * window) time and memory.

For a mask ``window(left, right)``, alone or ``&``-combined with ``causal`` and ``padding``, only the
band of keys each query can see is ever computed (``backends/band``): query blocks against their
key bands, never an (Lq, Lk) matrix. The band algorithm has several implementations, all of them this
backend's own: the native kernel forward (float32, dv % 16 == 0) and backward (d and dv
multiples of 16 too), torch's fused CPU attention kernel run on the bands (float32 / float64, d == dv),
and blocked matmuls (everything else, and the backward elsewhere). The backward recomputes the scores
(flash-attention style). ``dropout_p > 0`` differentiates the blocked band computation directly.
bfloat16 / float16 inputs are computed in float32 and cast back. Hidden keys never reach the output,
NaN / inf included (inputs holding NaN / inf take the blocked path with hidden scores replaced).

Takes every dtype, any device with data, autograd and dropout; no bias (``chunked`` takes window + bias),
no weights.
"""

from __future__ import annotations

from torch import Tensor

from ..masks import Mask, window_parts
from . import Backend, Call, register_backend
from .band import band_attention

__all__ = ["local_attention", "band_attention"]


def refuse(c: Call) -> str | None:
    if window_parts(c.mask) is None:
        return f"backend 'local' needs a window mask (optionally & causal & padding), got {c.mask!r}"
    return None


def local_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float,
                    dropout_p: float, need_weights: bool) -> tuple[Tensor, None]:
    """Backend "local": q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    left, right, lengths = window_parts(mask)
    return band_attention(q, k, v, left, right, lengths, scale, dropout_p), None


register_backend(Backend(
    "local", local_attention, "band attention: query blocks against their key bands, O(L * window)",
    bias=False, masks="window, & causal, & padding", refuse=refuse))
