"""Backend "short": attnkit's native CPU kernel for full attention over short sequences (padding allowed).

The kernel (``native/csrc/short_attention.h``) takes one (sequence, head) at a time, whole: K is
transposed once so that 16 keys sit in one vector (a zmm; two ymm on AVX2), the scores of 4 queries x 64 keys
(AVX2: 6 x 16) are accumulated in registers, the softmax runs along each row, and P V is accumulated 8 queries x 32
features at a time, while the next (sequence, head)'s rows are prefetched into L2. In bfloat16 both
products use AVX512-BF16's ``vdpbf16ps`` (bfloat16 pairs, float32 sums), so nothing is converted to
float32 on the way in; the math path's rounding points are kept (float32 scores and softmax, weights
rounded to bfloat16 before P V, output rounded once). In float32 the products are FMAs. Like ``tiled``
it reads q, k, v as strided (B, H, L, d) views (the heads of a fused QKV projection need no copy) and
writes its output in (B, L, H, dv) memory, so merging the heads afterwards is free.

Masks: none, padding (key lengths per batch row), or ``segments`` (sequences packed end to end along L,
each attending within itself: no compute on padding at all); a query with no key outputs zeros. Keys
past a length or outside a segment are never read, so hidden NaN / inf cannot reach the output.

It is this kernel or nothing: inference only (no backward), CPU, float32 (every variant) or bfloat16
(AVX512-BF16), d a multiple of 16 (bfloat16: 32), dv a multiple of 16, no bias, no dropout, no
weights. Any other call raises a ValueError saying which of these it broke.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from .. import native
from ..masks import Mask, full_parts
from . import Backend, Call, register_backend

__all__ = ["short_attention", "kernel_dtypes"]


def kernel_dtypes() -> tuple[torch.dtype, ...]:
    """The dtypes the compiled kernel runs here: float32 with AVX-512, bfloat16 also with AVX512-BF16
    (none without the kernel)."""
    kernel = native.kernel()
    return () if kernel is None else _dtypes(kernel)


@functools.cache
def _dtypes(kernel) -> tuple[torch.dtype, ...]:
    return (torch.float32, torch.bfloat16) if kernel.cpu_has_bf16() else (torch.float32,)


def as_4d(x: Tensor) -> Tensor:
    """(..., L, e) -> (B, H, L, e): 2-D gets B = H = 1, 3-D H = 1, 5-D and up merge all but the first."""
    if x.dim() == 2:
        return x[None, None]
    if x.dim() == 3:
        return x.unsqueeze(1)
    return x if x.dim() == 4 else x.reshape(x.shape[0], math.prod(x.shape[1:-2]), *x.shape[-2:])


def refuse(c: Call) -> str | None:
    if full_parts(c.mask) is None:
        return f"backend 'short' takes no mask, a padding mask or a segments mask, got {c.mask!r}"
    d, dv = c.q.shape[-1], c.v.shape[-1]
    step = 32 if c.q.dtype == torch.bfloat16 else 16
    if d % step or dv % 16:
        return f"backend 'short' needs d a multiple of {step} and dv of 16, got d={d}, dv={dv}"
    return None


def short_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float, dropout_p: float,
                    need_weights: bool) -> tuple[Tensor, None]:
    """Backend "short": q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    lengths, segments = full_parts(mask)
    lens = native.lengths_arg(lengths)
    q4, k4, v4 = (as_4d(x if x.stride(-1) == 1 else x.contiguous()) for x in (q, k, v))
    offs = torch.empty(0, dtype=torch.int64) if segments is None else segments.offsets().cpu().contiguous()
    out = native.kernel().short_forward(q4, k4, v4, lens, offs, scale)  # (B, H, Lq, dv)
    return out.reshape(*q.shape[:-1], v.shape[-1]), None


def step() -> object:
    """The raw kernel for ``attention.step_kernel``: ``fn(q, k, v, key_lengths, segment_offsets, scale, rows=None)``,
    q, k, v (B, H, L, d) strided views, ``native.lengths_arg`` lengths -> (B, H, Lq, dv) in (B, Lq, H, dv) memory;
    ``rows`` (B, >= Lk) int64: key j of row b is that of row rows[b, j] of k and v (then (B', H, Lk, d), any B': a
    beam search's K/V cache read in place; ``inference.layer.through_rows`` is its reference)."""
    return native.kernel().short_forward


register_backend(Backend(
    "short", short_attention, "native CPU kernel: full attention over short sequences, whole (sequence, head)s",
    grad=False, dropout=False, bias=False, dtypes=kernel_dtypes, devices=("cpu",), native=True,
    masks="none, padding, segments", refuse=refuse, step=step))
