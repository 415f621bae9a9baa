"""torch's fused ``scaled_dot_product_attention`` (flash / memory-efficient kernels on CPU).

Its bool mask convention is ours (True = take part), so masks pass through unchanged. Causal
masks with Lq == Lk use ``is_causal`` (no mask tensor at all). Rows with nothing to attend to are
given a harmless full row and zeroed afterwards, so they never produce NaN.

NaN / inf: torch's kernel adds the mask to the scores (NaN + -inf is NaN) and multiplies hidden
values by a weight of 0 (0 * NaN is NaN), so a NaN / inf in a key or value the mask hides would reach
the output. When a mask hides something and k or v holds NaN / inf (one ``isfinite`` pass over each),
this backend computes the call with the masked reference formula instead (``math``), which keeps
hidden pairs out; finite inputs, and every call without a mask, run torch's kernel.
Takes any mask, bias, dtype and device (also meta), autograd and dropout; no weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..bias import materialize_bias
from ..masks import Causal, Mask
from ..policy import all_finite
from . import Backend, register_backend
from .math import math_attention


def sdpa_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | None,
                   scale: float, dropout_p: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    lq, lk = q.shape[-2], k.shape[-2]
    if mask is None and bias is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, scale=scale), None
    if mask is not None and not all_finite(k, v):  # hidden NaN / inf: see the module docstring
        return math_attention(q, k, v, mask, bias, scale, dropout_p, False)
    if isinstance(mask, Causal) and bias is None and lq == lk:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale), None

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
        bias = bias.to(q.dtype)
        attn_mask = bias if attn_mask is None else bias.masked_fill(~attn_mask, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
    if live is not None:
        out = torch.where(live, out, 0.0)
    return out, None


register_backend(Backend(
    "sdpa", sdpa_attention, "torch's fused scaled_dot_product_attention (with its backward)", meta=True))
