"""Backend "tiled": attnkit's native CPU kernel for masks made of window, causal and padding.

The kernel (``native/csrc/window_attention.h``) takes tiles of 16 queries; a tile's keys are the union
of its rows' windows, so no score outside that band is ever computed and no (Lq, Lk) mask is ever
built. It reads q, k and v as strided (B, H, L, d) views (the heads of a fused QKV projection need no
copy) in float32 or bfloat16, computes in float32, and writes its output in (B, L, H, dv) memory, so
merging the heads afterwards is free as well. A key outside a row's window never enters that row,
NaN / inf included.

It is this kernel or nothing: inference only (no backward; ``local`` has one), CPU, float32 or
bfloat16, any head size, no bias, no dropout, no weights. Any other call raises a ValueError
saying which of these it broke.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import native
from ..masks import Mask, window_parts
from . import Backend, Call, register_backend
from .short import as_4d

__all__ = ["tiled_attention"]


def _parts(mask: Mask | None, lq: int, lk: int) -> tuple[int, int, Tensor | None]:
    """(left, right, lengths); a missing side of the window is "every key": with queries aligned to
    the end of the keys (query i sits at key i + Lk - Lq), Lq + Lk covers every offset."""
    left, right, lengths = window_parts(mask, require_window=False)
    return (lq + lk if left is None else left), (lq + lk if right is None else right), lengths


def refuse(c: Call) -> str | None:
    if window_parts(c.mask, require_window=False) is None:
        return f"backend 'tiled' needs no mask or one made of window / causal / padding, got {c.mask!r}"
    return None


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float, dropout_p: float,
                    need_weights: bool) -> tuple[Tensor, None]:
    """Backend "tiled": q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    left, right, lengths = _parts(mask, q.shape[-2], k.shape[-2])
    q4, k4, v4 = (as_4d(x if x.stride(-1) == 1 else x.contiguous()) for x in (q, k, v))
    out, _ = native.kernel().window_forward(q4, k4, v4, native.lengths_arg(lengths), left, right, scale)
    return out.reshape(*q.shape[:-1], v.shape[-1]), None  # (B, H, Lq, dv) -> (..., Lq, dv)


register_backend(Backend(
    "tiled", tiled_attention, "native CPU kernel: tiles of 16 queries over the union of their windows",
    grad=False, dropout=False, bias=False, dtypes=(torch.float32, torch.bfloat16), devices=("cpu",),
    native=True, masks="none, causal, window, padding (and their &)", refuse=refuse))
