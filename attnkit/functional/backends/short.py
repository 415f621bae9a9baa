"""Backend "short": attnkit's native CPU kernel for full attention over short sequences (padding allowed).

The kernel (``csrc/short_attention.h``, built with the other native kernels by ``native.window_kernel``)
takes one (sequence, head) at a time, whole: K is transposed once so that 16 keys sit in one zmm
register, the scores of 4 queries x 64 keys are accumulated in registers, the softmax runs along
each row, and P V is accumulated 8 queries x 32 features at a time, while the next (sequence, head)'s
rows are prefetched into L2. In bfloat16 both products use AVX512-BF16's ``vdpbf16ps`` (bfloat16
pairs, float32 sums), so nothing is converted to float32 on the way in; the math path's rounding
points are kept (float32 scores and softmax, weights rounded to bfloat16 before P V, output rounded
once). In float32 the products are FMAs. Like ``tiled`` it reads
q, k, v as strided (B, H, L, d) views (the heads of a fused QKV projection need no copy) and writes
its output in (B, L, H, dv) memory, so merging the heads afterwards is free.

Masks: none, padding (key lengths per batch row), or ``segments`` (sequences packed end to end along L,
each attending within itself: no compute on padding at all); a query with no key outputs zeros.
With gradients, dropout, bias, other masks or where the kernel cannot run (no AVX-512, no compiler,
bfloat16 without AVX512-BF16, d not a multiple of 16 (bfloat16: 32), dv not a multiple of 16),
the call goes to ``math``, the reference.

Automatic choice: inference on CPU, float32 or bfloat16, one of those masks, Lk (or the longest segment)
<= ``AUTO_MAX_LEN``
(``bench/attention.py --short``, 12 heads of 32, 2 threads, 2026-11-22 19:06 UTC: in bfloat16 1.9-11x
SDPA's time from 8 to 256 keys and ahead of ``math_grouped`` and ``tiled`` at every length; in float32
at or ahead of ``tiled`` at every length, 1.0-2.4x SDPA). Causal and window masks go to ``tiled``.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from ..masks import Mask, Segments
from . import Backend, register_backend
from .local import window_parts
from .math import math_attention
from .native import lengths_arg, window_kernel
from .tiled import _as_4d

__all__ = ["short_attention", "kernel_dtypes", "kernel_runs"]

AUTO_MAX_LEN = 256


def kernel_dtypes() -> tuple[torch.dtype, ...]:
    """The dtypes the compiled kernel runs here: float32 with AVX-512, bfloat16 also with AVX512-BF16."""
    kernel = window_kernel()
    return () if kernel is None else _dtypes(kernel)


@functools.cache
def _dtypes(kernel) -> tuple[torch.dtype, ...]:
    return (torch.float32, torch.bfloat16) if kernel.short_bf16_supported() else (torch.float32,)


def kernel_runs(dtype: torch.dtype, d: int, dv: int) -> bool:
    """Whether the compiled kernel takes q, k of feature size d and v of dv in ``dtype`` here."""
    return dtype in kernel_dtypes() and d % (32 if dtype == torch.bfloat16 else 16) == 0 and dv % 16 == 0


def _structure(mask: Mask | None) -> tuple[bool, Tensor | None, Tensor | None]:
    """(ok, key lengths, segment offsets): ok when the mask is None, padding only, or one ``Segments``."""
    if isinstance(mask, Segments):
        return True, None, mask.offsets()
    parts = window_parts(mask, require_window=False)
    if parts is None or parts[0] is not None or parts[1] is not None:  # a window or causal part
        return False, None, None
    return True, parts[2], None


def _shapes_ok(q: Tensor, k: Tensor, dv: int) -> bool:
    return (q.device.type == "cpu" and q.dim() >= 2 and q.shape[:-2] == k.shape[:-2] and k.dtype == q.dtype
            and kernel_runs(q.dtype, q.shape[-1], dv))


def short_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float, dropout_p: float,
                    need_weights: bool) -> tuple[Tensor, None]:
    """Backend "short": q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    if need_weights:
        raise ValueError("backend 'short' cannot return weights; use backend='math'")
    ok, lengths, offsets = _structure(mask)
    if not ok:
        raise ValueError(f"backend 'short' takes no mask, a padding mask or a segments mask, got {mask!r}")
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    usable = v.dtype == q.dtype and v.shape[:-2] == q.shape[:-2] and _shapes_ok(q, k, v.shape[-1])
    if bias is not None or dropout_p > 0 or grad or not usable:
        return math_attention(q, k, v, mask, bias, scale, dropout_p, False)
    lens = lengths_arg(lengths)
    if lengths is not None and lens.numel() != (q.shape[0] if q.dim() > 2 else 1):
        raise ValueError(f"backend 'short': padding lengths {tuple(lengths.shape)} do not match the batch "
                         f"dim of q {tuple(q.shape)}")
    q4, k4, v4 = (_as_4d(x if x.stride(-1) == 1 else x.contiguous()) for x in (q, k, v))
    offs = torch.empty(0, dtype=torch.int64) if offsets is None else offsets.cpu().contiguous()
    out = window_kernel().short_forward(q4, k4, v4, lens, offs, scale)  # (B, H, Lq, dv)
    return out.reshape(*q.shape[:-1], v.shape[-1]), None


def _auto(q: Tensor, k: Tensor, mask: Mask | None, bias, need_weights: bool) -> bool:
    if bias is not None or need_weights or torch.is_grad_enabled():
        return False
    longest = mask.longest if isinstance(mask, Segments) else k.shape[-2]
    if not _structure(mask)[0] or longest > AUTO_MAX_LEN:
        return False
    # v is not passed to the predicate: assume dv == d (otherwise the call still works, via math)
    return _shapes_ok(q, k, q.shape[-1])


register_backend(Backend("short", short_attention, priority=-35, auto=_auto))
