"""The math path over cache-sized groups of the batch, for short reduced-precision sequences on CPU.

For sentence-length inputs in bfloat16 (L up to a few hundred, many sequences), SDPA's flash kernel
on CPU spends more time per (batch, head) tile than the work is worth. Running the reference maths
(bfloat16 products, float32 softmax) a few sequences at a time, so each group's float32 scores stay
in cache (``GROUP_BYTES``), is faster. Measured with ``bench/attention.py --short`` (forward,
bfloat16, 12 heads of 32, ~2880 tokens per call, 2 threads, idle machine, 2026-11-22): 1.02-1.50x SDPA
for L = 24 to 256 (0.93x at L = 16), 0.98x at L = 512; in float32 SDPA was faster at every length
tried (one thread). Hence the automatic rule: inference (no autograd), CPU, bfloat16/float16,
Lq and Lk <= ``MAX_LEN``, no bias. (Calls with no mask or a padding mask go to the native ``short``
kernel first, where the CPU has AVX512-BF16.)

Same signature and results as ``math`` (a query with nothing to attend to outputs zeros).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..bias import materialize_bias
from ..masks import Mask
from . import Backend, register_backend
from .math import LOW_PRECISION, math_attention

GROUP_BYTES = 1 << 21  # float32 scores per group
MAX_LEN = 256


def _rows(t: Tensor | None, s: int, e: int) -> Tensor | None:
    """Rows s:e of the leading dim, or ``t`` itself when it broadcasts there (size 1)."""
    return t if t is None or t.dim() < 3 or t.shape[0] == 1 else t[s:e]


def grouped_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | None,
                      scale: float, dropout_p: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    if need_weights:
        raise ValueError("backend 'math_grouped' cannot return weights; use backend='math'")
    if q.dim() < 3 or q.shape[0] <= 1:
        return math_attention(q, k, v, mask, bias, scale, dropout_p, False)
    lq, lk = q.shape[-2], k.shape[-2]
    per_row = q[0].numel() // q.shape[-1] * lk * 4  # bytes of float32 scores for one leading index
    step = max(1, GROUP_BYTES // per_row)
    work = torch.float32 if q.dtype in LOW_PRECISION else q.dtype
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()  # e.g. views of a packed QKV projection
    add = live = None  # additive float mask/bias (B|1, ..., Lq|1, Lk); rows with a key (B|1, ..., Lq|1, 1)
    if mask is not None:
        dense = mask.materialize(lq, lk, q.dim(), q.device)  # bool, broadcastable to (B, ..., Lq, Lk)
        live = dense.any(-1, keepdim=True)
        if bool(live.all()):
            live = None
        else:
            dense = dense | ~live  # empty rows attend everywhere, then are zeroed
        add = torch.zeros(dense.shape, dtype=work, device=q.device).masked_fill_(~dense, float("-inf"))
    if bias is not None:
        b = materialize_bias(bias, lq, lk, q.device, work, q.dim())
        add = b if add is None else add + b
    outs = []
    for s in range(0, q.shape[0], step):
        e = s + step
        a = (q[s:e] @ k[s:e].transpose(-2, -1)).to(work)  # Q K^T for this group: (b, ..., Lq, Lk)
        a = a.mul_(scale) if add is None else torch.add(_rows(add, s, e), a, alpha=scale)  # A
        w = a.softmax(-1).to(q.dtype)  # A'
        if dropout_p > 0:
            w = F.dropout(w, dropout_p)
        outs.append(w @ v[s:e])  # O = A' V: (b, ..., Lq, dv)
    out = torch.cat(outs)
    return (out if live is None else torch.where(live, out, 0.0)), None


def _auto(q: Tensor, k: Tensor, mask: Mask | None, bias, need_weights: bool) -> bool:
    return (q.device.type == "cpu" and q.dtype in LOW_PRECISION and bias is None and q.dim() >= 3
            and q.shape[-2] <= MAX_LEN and k.shape[-2] <= MAX_LEN and not torch.is_grad_enabled())


register_backend(Backend("math_grouped", grouped_attention, priority=-60, auto=_auto))
