"""The NaN / inf policy every backend follows, and the helpers its PyTorch paths use.

1. A masked-out (query, key) pair never influences that query's output: neither its score nor its
   value enters, whatever they hold (NaN, +-inf). Kernels replace hidden scores (never add -inf to them)
   and never multiply a hidden value in, not even by a weight of 0 (0 * NaN is NaN).
2. Over the keys a query may attend to, the output is softmax(scores) @ values in IEEE arithmetic, as
   torch's SDPA computes it without a mask: a NaN or +inf score makes the query's row NaN, a -inf score
   is a weight of 0 (a row whose scores are all -inf is NaN), a NaN or inf value reaches the output
   columns it is multiplied into.
3. A query with nothing to attend to outputs zeros.
4. float16 scores are computed and normalised in float32 (float16 overflows at 65504), so a call gives
   a number or NaN whatever backend the grad mode leads to.

Kernels that read only the visible keys (``short``, ``graph``) or mask per key inside the kernel
(``tiled``, ``local``'s native forward) follow it at no cost. Paths built from dense matrix products
check whether an input holds NaN / inf (``all_finite``, one pass, only when a mask hides something) and
then take their masked formulation (``visible_product``).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["all_finite", "visible_product"]


def all_finite(*ts: Tensor) -> bool:
    """True when no tensor holds NaN or +-inf (meta tensors, which hold nothing, count as finite)."""
    flags = [torch.isfinite(t).all() for t in ts if t.device.type != "meta" and t.numel()]
    if not flags:
        return True
    return bool(torch.stack(flags).all()) if len(flags) > 1 else bool(flags[0])


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
