"""Backend "tiled": attnkit's native CPU kernel for masks made of window, causal and padding.

The kernel (``csrc/window_attention.cpp``, built by ``native.window_kernel``) takes tiles of 16
queries; a tile's keys are the union of its rows' windows, so no score outside that band is ever
computed and no (Lq, Lk) mask is ever built. It reads q, k and v as strided (B, H, L, d) views (the
heads of a fused QKV projection need no copy) in float32 or bfloat16, computes in float32, and writes
its output in (B, L, H, dv) memory, so merging the heads afterwards is free as well.

With gradients, dropout, or where the kernel cannot run (no AVX-512 or compiler, other dtypes,
dv not a multiple of 16), the call goes to ``local.band_attention``, the PyTorch path with the same
maths (and a recomputing backward).

Automatic choice: inference on CPU with Lk <= 64 (float32) or Lk <= 16 (bfloat16). Calls with no mask
or a padding mask go to the ``short`` kernel first wherever it runs (both dtypes), so in practice this
rule serves causal and window masks. It was measured (before ``short`` existed, with the kernel still
on one thread) on the unmasked and padded case; the rule comes
from attention timed inside the model it serves (all-MiniLM-L6-v2 encoding the 2000 sentences of
``bench/embed.py``, 12 heads of 32, batch 64, 2 threads, time summed over the attention calls of
each length, interleaved medians of 3; 2026-11-22 16:05 UTC): in float32 this kernel took 1.05-1.10 s
against SDPA's 1.45 s and ``math_grouped``'s 1.22 s, ahead of SDPA at every length from 6 to 63.
On longer inputs (joined sentences, 64 to 223 keys) the three took about the same in total and
none led at every length, so SDPA keeps them. In bfloat16 it won below 16 keys; from there ``math_grouped``'s bfloat16
matrix products win (0.75 s against 0.92 s over the whole workload), since this kernel converts
every element it reads to float32. Isolated timings (``bench/attention.py --short``) disagreed from
run to run beyond 24 keys; BENCHMARKS.md has both.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..masks import Mask
from . import Backend, register_backend
from .local import band_attention, window_parts
from .native import lengths_arg, window_kernel

__all__ = ["tiled_attention"]

DTYPES = (torch.float32, torch.bfloat16)
AUTO_MAX_LEN = {torch.float32: 64, torch.bfloat16: 16}


def _parts(mask: Mask | None, lq: int, lk: int) -> tuple[int, int, Tensor | None]:
    """(left, right, lengths); a missing side of the window is "every key": with queries aligned to
    the end of the keys (query i sits at key i + Lk - Lq), Lq + Lk covers every offset."""
    parts = window_parts(mask, require_window=False)
    if parts is None:
        raise ValueError(f"backend 'tiled' needs no mask or one made of window / causal / padding, got {mask!r}")
    left, right, lengths = parts
    return (lq + lk if left is None else left), (lq + lk if right is None else right), lengths


def _kernel_applies(q: Tensor, k: Tensor, dv: int) -> bool:
    """CPU, q and k of one kernel dtype with the same leading dims, dv a multiple of 16."""
    return (q.device.type == "cpu" and q.dtype in DTYPES and k.dtype == q.dtype and dv % 16 == 0
            and q.dim() >= 2 and q.shape[:-2] == k.shape[:-2])


def _needs_grad(*ts: Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in ts)


def _as_4d(x: Tensor) -> Tensor:
    """(..., L, e) -> (B, H, L, e): 2-D gets B = H = 1, 3-D H = 1, 5-D and up merge all but the first."""
    if x.dim() == 2:
        return x[None, None]
    if x.dim() == 3:
        return x.unsqueeze(1)
    return x if x.dim() == 4 else x.reshape(x.shape[0], -1, *x.shape[-2:])


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float, dropout_p: float,
                    need_weights: bool) -> tuple[Tensor, None]:
    """Backend "tiled": q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    if need_weights:
        raise ValueError("backend 'tiled' cannot return weights; use backend='math'")
    if bias is not None:
        raise ValueError("backend 'tiled' takes no `bias`; use backend='chunked' or 'math'")
    left, right, lengths = _parts(mask, q.shape[-2], k.shape[-2])
    usable = (_kernel_applies(q, k, v.shape[-1]) and v.dtype == q.dtype and v.shape[:-2] == q.shape[:-2]
              and window_kernel() is not None)
    if dropout_p > 0 or _needs_grad(q, k, v) or not usable:
        return band_attention(q, k, v, left, right, lengths, scale, dropout_p), None
    lens = lengths_arg(lengths)
    if lengths is not None and lens.numel() != (q.shape[0] if q.dim() > 2 else 1):
        raise ValueError(f"backend 'tiled': padding lengths {tuple(lengths.shape)} do not match the batch "
                         f"dim of q {tuple(q.shape)}")
    q4, k4, v4 = (_as_4d(x if x.stride(-1) == 1 else x.contiguous()) for x in (q, k, v))
    out, _ = window_kernel().window_forward(q4, k4, v4, lens, left, right, scale)  # (B, H, Lq, dv)
    return out.reshape(*q.shape[:-1], v.shape[-1]), None


def _auto(q: Tensor, k: Tensor, mask: Mask | None, bias, need_weights: bool) -> bool:
    if bias is not None or need_weights or q.dtype not in AUTO_MAX_LEN or torch.is_grad_enabled():
        return False
    if k.shape[-2] > AUTO_MAX_LEN[q.dtype] or window_parts(mask, require_window=False) is None:
        return False
    # v is not passed to the predicate: assume dv == d (otherwise the call still works, via the PyTorch path)
    return _kernel_applies(q, k, q.shape[-1]) and window_kernel() is not None


register_backend(Backend("tiled", tiled_attention, priority=-40, auto=_auto))
