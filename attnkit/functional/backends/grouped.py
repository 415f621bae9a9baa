"""The math path over cache-sized groups of the batch, for short reduced-precision sequences on CPU.

For sentence-length inputs in bfloat16 (L up to a few hundred, many sequences), SDPA's flash kernel
on CPU spends more time per (batch, head) tile than the work is worth. Running the reference maths
(bfloat16 products, float32 softmax; float16 products in float32) a few sequences at a time, so each
group's float32 scores stay in cache (``GROUP_BYTES``), is faster; when it is chosen automatically is
in ``attnkit.functional.dispatch``.

Same signature and results as ``math``, NaN / inf policy included: a query with nothing to attend to
outputs zeros; the mask is added to the scores, so a hidden NaN / inf that got in comes out as NaN (and
so does a row of -inf scores), and an output that is not finite is computed again with ``math``'s masked
softmax (hidden scores replaced, rows without weight zeroed) and only visible pairs multiplied. A batch
of one (or 2-D inputs) is one group.
Takes any mask, bias, dtype and device, autograd and dropout; no weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..bias import materialize_bias
from ..masks import Mask
from ..policy import finite, visible_product
from . import Backend, register_backend
from .math import LOW_PRECISION, scores_of

GROUP_BYTES = 1 << 21  # float32 scores per group


def _rows(t: Tensor | None, s: int, e: int) -> Tensor | None:
    """Rows s:e of the leading dim, or ``t`` itself when it broadcasts there (size 1)."""
    return t if t is None or t.dim() < 3 or t.shape[0] == 1 else t[s:e]


def grouped_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | None,
                      scale: float, dropout_p: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    if q.dim() == 2:  # one sequence: one group of one
        out, _ = grouped_attention(q[None], k[None], v[None], mask, bias, scale, dropout_p, False)
        return out[0], None
    lq, lk = q.shape[-2], k.shape[-2]
    per_row = math.prod(q.shape[1:-1]) * lk * 4  # bytes of float32 scores for one leading index
    step = max(1, GROUP_BYTES // max(per_row, 1))
    work = torch.float32 if q.dtype in LOW_PRECISION else q.dtype
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()  # e.g. views of a packed QKV projection
    add = live = dense = None  # additive float mask/bias (B|1, ..., Lq|1, Lk); rows with a key (B|1, ..., Lq|1, 1)
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

    def groups(exact: bool) -> Tensor:  # exact: hidden scores replaced, visible values multiplied only
        outs = []
        for s in range(0, q.shape[0], step):
            e = s + step
            a = scores_of(q[s:e], k[s:e]).to(work)  # Q K^T for this group: (b, ..., Lq, Lk)
            a = a.mul_(scale) if add is None else torch.add(_rows(add, s, e), a, alpha=scale)  # A
            if exact:  # the masked softmax of ``math``: hidden scores replaced, rows of -inf get zeros
                a = a if dense is None else a.masked_fill(~_rows(dense, s, e), float("-inf"))
                some = (a != float("-inf")).any(-1, keepdim=True)
                a = torch.where(some, a, 0.0).softmax(-1) * some
            w = (a if exact else a.softmax(-1)).to(q.dtype)  # A'
            if dropout_p > 0:
                w = F.dropout(w, dropout_p)
            outs.append(visible_product(w, v[s:e], _rows(dense, s, e)) if exact else w @ v[s:e])  # O = A' V
        out = torch.cat(outs) if outs else q.new_zeros(*q.shape[:-1], v.shape[-1])
        return out if live is None else torch.where(live, out, 0.0)

    out = groups(exact=False)
    if not finite(out):  # perhaps a hidden NaN / inf got in, or a row of -inf scores: see the module docstring
        out = groups(exact=True)
    return out, None

register_backend(Backend(
    "math_grouped", grouped_attention, "the math path a few sequences at a time, scores kept in cache"))
