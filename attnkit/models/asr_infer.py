"""The speech recogniser's encoder stack for inference: the modules' maths in fewer operations.

An utterance at batch 1 is some 50-200 encoder steps of d = 144, so each of the encoder's operations is small
and the modules' own path (``nn.Encoder``) spends about as long around its products as in them: every layer
re-makes the window & padding mask, re-computes the rotary tables for q and for k, and goes through
``attention``'s checks and backend choice. ``encoder_stack`` runs the same operations, in the same order and
on the model's own weights (nothing copied), with what the layers share made once per call:

- the backend the dispatch table chooses (``functional.select_backend``, asked once: every layer's call has the
  same shapes, dtype and mask); where that is ``sdpa`` the dense mask is made once and torch's kernel called
  with it, as the ``sdpa`` backend does, with its rules (a query with no key to attend to outputs zeros; an output
  that is not finite means the caller runs the modules' path instead); any other backend is called by name
  through ``attention`` with the structured mask (``local`` on long inputs);
- the rotary cos / sin tables, once per call, and each layer's q and k rotated together.

Its output equals the modules' bit for bit (the tests compare them). It runs only in inference (no autograd,
eval mode, no attention weights asked) and for encoders whose attention is the default ``MultiHeadAttention``
with rotary or no in-attention positions (``supports``); otherwise ``AsrModel`` takes the modules' path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..functional import attention, select_backend
from ..functional.masks import Mask, for_heads
from ..functional.positional import rotary_cos_sin
from ..nn.attention import MultiHeadAttention
from ..nn.blocks import ACTIVATION_FNS
from ..nn.positional import Rotary

__all__ = ["supports", "encoder_stack"]


def supports(encoder: nn.Module) -> bool:
    """Whether ``encoder_stack`` runs this ``nn.Encoder``: default packed attention, rotary or no in-attention
    positions, an activation of ``ACTIVATION_FNS``."""
    for layer in encoder.layers:
        attn = layer.self_attn
        if (type(attn) is not MultiHeadAttention or not attn.packed
                or not (attn.position is None or type(attn.position) is Rotary)
                or layer.ff.activation not in ACTIVATION_FNS):
            return False
    return True


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``functional.positional.apply_rotary``'s result, bit for bit, in four operations: x (..., dh); cos = (cos,
    cos), sin = (-sin, sin) broadcast to (..., dh), of x's dtype. (x1 c - x2 s, x1 s + x2 c) = x cos + (x2, x1)
    sin: in IEEE arithmetic a + (-b) is a - b and a + b is b + a."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((x2, x1), dim=-1) * sin


class _Attend:
    """q, k, v (B, H, L, dh) -> (B, H, L, dh): every layer's self-attention under one mask (see the module doc)."""

    def __init__(self, q: Tensor, k: Tensor, v: Tensor, mask: Mask):
        self.mask, self.backend = mask, select_backend(q, k, v, mask)
        self.dense = self.live = None
        if self.backend == "sdpa":
            lq, lk = q.shape[-2], k.shape[-2]
            dense = mask.materialize(lq, lk, q.dim(), q.device)  # bool, broadcastable to (B, H, Lq, Lk)
            live = dense.any(-1, keepdim=True)  # (..., Lq, 1): the queries with a key to attend to
            self.live = None if bool(live.all()) else live
            self.dense = dense if self.live is None else dense | ~live

    def __call__(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        if self.dense is None:
            return attention(q, k, v, self.mask, backend=self.backend)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.dense, scale=q.shape[-1] ** -0.5)
        return out if self.live is None else torch.where(self.live, out, 0.0)


def encoder_stack(encoder: nn.Module, x: Tensor, mask: Mask) -> Tensor:
    """``nn.Encoder.forward(x, mask).last_hidden_state`` in inference: x (B, L, d), ``mask`` an attnkit mask
    (True = may attend) -> (B, L, d). The caller checks ``supports(encoder)``, eval mode and no autograd."""
    if encoder.position is not None:
        x = encoder.position(x)
    b, t, d = x.shape
    first = encoder.layers[0].self_attn
    h, dh = first.num_heads, first.head_dim
    rope = first.position is not None
    if rope:  # (L, 1, 1, dh): broadcast over q and k and the heads of (B, L, 2, H, dh)
        cos, sin = (c.to(x.dtype)[:, None, None] for c in rotary_cos_sin(torch.arange(t, device=x.device), dh,
                                                                           first.position.base))
        cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)
    attend, mask = None, for_heads(mask)
    for layer in encoder.layers:  # the modules' weights, called through torch.nn.functional (no module calls)
        attn, pre, ff = layer.self_attn, layer.attn_block.norm_first, layer.ff
        n1, nf = layer.attn_block.norm, layer.ff_block.norm
        qkv = _linear(attn.in_proj, _norm(n1, x) if pre else x).view(b, t, 3, h, dh)
        qk = _rotate(qkv[:, :, :2], cos, sin) if rope else qkv[:, :, :2]  # q and k rotated at once
        q, k, v = (y.transpose(1, 2) for y in (qk[:, :, 0], qk[:, :, 1], qkv[:, :, 2]))  # (B, H, L, dh) each
        if attend is None:
            attend = _Attend(q, k, v, mask)
        y = _linear(attn.out_proj, attend(q, k, v).transpose(1, 2).reshape(b, t, d))  # (B, H, L, dh) -> (B, L, d)
        x = x + y if pre else _norm(n1, x + y)
        y = _linear(ff.linear2, ACTIVATION_FNS[ff.activation](_linear(ff.linear1, _norm(nf, x) if pre else x)))
        x = x + y if pre else _norm(nf, x + y)
    return _norm(encoder.norm, x) if isinstance(encoder.norm, nn.LayerNorm) else encoder.norm(x)


def _linear(module: nn.Linear, x: Tensor) -> Tensor:
    return F.linear(x, module.weight, module.bias)


def _norm(module: nn.LayerNorm, x: Tensor) -> Tensor:
    return F.layer_norm(x, module.normalized_shape, module.weight, module.bias, module.eps)
