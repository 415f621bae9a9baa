"""torch's fused ``scaled_dot_product_attention`` (flash / memory-efficient kernels on CPU).

Its bool mask convention is ours (True = take part), so masks pass through unchanged. Causal
masks with Lq == Lk use ``is_causal`` (no mask tensor at all). Rows with nothing to attend to are
given a harmless full row and zeroed afterwards, so they never produce NaN.

NaN / inf: torch's kernel adds the mask to the scores (NaN + -inf is NaN) and multiplies hidden
values by a weight of 0 (0 * NaN is NaN), so a NaN / inf in a key or value the mask hides comes out as
NaN. A masked call whose output is not finite (one sum) is therefore computed again with the masked
reference formula (``math``), which keeps hidden pairs out (and gives a NaN / inf the query does see as
torch's kernel does). In float16 / bfloat16 torch's CPU kernel also turns a row with a +inf score into
zeros about as often as into NaN (measured: 40 of 100 such rows, torch 2.13; never in float32 / float64),
so there q or k holding NaN / inf (one sum each) sends the call to the reference formula too. Every
other call is torch's kernel's.
Takes any mask, bias, dtype and device (also meta), autograd and dropout; no weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..bias import materialize_bias
from ..masks import Causal, Mask
from ..policy import finite
from . import Backend, register_backend
from .math import LOW_PRECISION, math_attention


def sdpa_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | None,
                   scale: float, dropout_p: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    lq, lk = q.shape[-2], k.shape[-2]
    if q.dtype in LOW_PRECISION and not (finite(q) and finite(k)):  # see the module docstring
        return math_attention(q, k, v, mask, bias, scale, dropout_p, False)
    if mask is None and bias is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, scale=scale), None
    if isinstance(mask, Causal) and bias is None and lq == lk:
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale)
        return _policy(out, q, k, v, mask, bias, scale, dropout_p)

    live = None
    attn_mask = None
    if mask is not None:
        dense = mask.materialize(lq, lk, q.dim(), q.device)  # bool, broadcastable to (..., Lq, Lk)
        live = dense.any(-1, keepdim=True)  # (..., Lq or 1, 1)
        if q.device.type != "meta" and bool(live.all()):
            live = None
        else:
            dense = dense | ~live
        attn_mask = dense
    if bias is not None:
        bias = materialize_bias(bias, lq, lk, q.device, q.dtype, q.dim())  # Bias -> (H or 1, Lq, Lk)
        bias = bias.to(q.dtype).reshape(*([1] * (2 - bias.dim())), *bias.shape)  # SDPA wants 2 dims or more
        attn_mask = bias if attn_mask is None else bias.masked_fill(~attn_mask, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
    if live is not None:
        out = torch.where(live, out, 0.0)
    return _policy(out, q, k, v, mask, bias, scale, dropout_p)


def _policy(out, q, k, v, mask, bias, scale, dropout_p) -> tuple[Tensor, None]:
    """A masked call whose output is not finite may hold a hidden NaN / inf: the reference formula instead."""
    if mask is not None and not finite(out):
        return math_attention(q, k, v, mask, bias, scale, dropout_p, False)
    return out, None


register_backend(Backend(
    "sdpa", sdpa_attention, "torch's fused scaled_dot_product_attention (with its backward)", meta=True))
