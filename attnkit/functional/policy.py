"""Helpers for the NaN / inf policy every backend follows (stated in ``attnkit.functional.attention``'s
docstring: hidden pairs never influence an output, visible NaN / inf propagate as in IEEE softmax, a query
with nothing to attend to (or only -inf scores) gets zeros, float16 scores in float32).

Kernels that read only the visible keys (``short``, ``graph``) or mask per key inside the kernel
(``tiled``, ``local``'s native forward) follow it at no cost. Paths built from dense matrix products add
-inf to hidden scores and multiply hidden values by a weight of 0; a NaN / inf that gets in that way
always comes out as NaN (NaN + -inf, +inf + -inf, 0 * NaN and 0 * inf are all NaN). So they run as they
are and check their output (``finite``, one sum): a finite output is the policy's answer; otherwise they
compute again with hidden scores replaced and only visible pairs multiplied (``visible_product``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["finite", "visible_product"]

_LOW = (torch.float16, torch.bfloat16)


def finite(t: Tensor) -> bool:
    """True when ``t`` holds no NaN / inf, from one sum (in float32 for float16 / bfloat16; a sum that
    overflows only costs a needless second pass). Meta and empty tensors count as finite."""
    if t.is_meta or not t.numel():
        return True
    return math.isfinite((t.sum(dtype=torch.float32) if t.dtype in _LOW else t.sum()).item())


def visible_product(w: Tensor, v: Tensor, visible: Tensor | None) -> Tensor:
    """sum over visible j of w[..., i, j] * v[..., j, :], in IEEE arithmetic over those pairs only.

    w (..., Lq, Lk) weights (0 where hidden), v (..., Lk, dv), ``visible`` bool broadcastable to w.
    Equals ``w @ v`` when v is finite; a NaN / inf in v reaches exactly the rows that see it (with
    w * v's IEEE value: inf for a positive weight, NaN for a weight of 0 or mixed signs).
    """
    bad = ~torch.isfinite(v)
    if visible is None or not bool(bad.any()):
        return w @ v
    out = w @ v.masked_fill(bad, 0.0)  # (..., Lq, dv), finite values only
    vis = visible.expand_as(w)
    def hits(rows: Tensor, cols: Tensor) -> Tensor:  # (i, c): some visible j with rows[i, j] and cols[j, c]
        return (rows.float() @ cols.float()) > 0

    nan = hits(vis, torch.isnan(v)) | hits(vis & (w == 0), torch.isinf(v))
    pos, neg = hits(vis & (w > 0), v == float("inf")), hits(vis & (w > 0), v == float("-inf"))
    extra = torch.where(nan | (pos & neg), float("nan"), torch.where(pos, float("inf"),
                        torch.where(neg, float("-inf"), 0.0)))
    return out + extra.to(out.dtype)
