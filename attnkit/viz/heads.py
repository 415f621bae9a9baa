"""Per-head q, k, v of a real model, for the lecture view: a clean look inside ``MultiHeadAttention``.

``capture_attention(model, run)`` registers a forward pre-hook on every ``MultiHeadAttention`` of
``model``, calls ``run()`` (anything that runs the model once: ``enc.attend(text)``, a tagger's
``tag(...)``), removes the hooks and returns each attention call's inputs (query, key, value, mask) in
call order. Nothing is kept on the modules. ``head_parts(module, call)`` then recomputes that call's
projections with the module's own weights, split into heads, after any in-attention position
(RoPE rotates q and k); ``explain_layer`` runs ``attnkit.explain`` on them and merges the heads with
W^o, which gives back the module's own output (the tests check it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..functional import Intermediates, explain
from ..functional.masks import Mask, for_heads
from ..nn.attention import MultiHeadAttention

__all__ = ["AttentionCall", "LayerParts", "capture_attention", "head_parts", "call_mask", "explain_layer"]


class AttentionCall(NamedTuple):
    """The inputs of one ``MultiHeadAttention.forward`` call (batch-first; ``key is query`` for self-attention)."""

    module: MultiHeadAttention
    query: Tensor  # (B, Lq, d_model)
    key: Tensor  # (B, Lk, kdim)
    value: Tensor  # (B, Lk, vdim)
    mask: Mask | Tensor | None


class LayerParts(NamedTuple):
    """One attention layer of one example, head by head: what the lecture view draws."""

    q: Tensor  # (H, Lq, dh): q^i of every head, as dotted with the keys (after RoPE, if any)
    k: Tensor  # (H, Lk, dh)
    v: Tensor  # (H, Lk, dv)
    w_o: Tensor | None  # (d_out, H * dv): W^o; columns h*dv:(h+1)*dv take head h's output (None: no W^o)
    b_o: Tensor | None  # (d_out,)
    mask: Tensor | None  # (Lq, Lk) bool, True = may attend; None = every key


def capture_attention(model: nn.Module, run: Callable[[], object]) -> list[AttentionCall]:
    """Run ``run()`` once and return the inputs of every ``MultiHeadAttention`` call made, in order."""
    calls: list[AttentionCall] = []

    def hook(module, args, kwargs):
        names = ("query", "key", "value", "mask")
        given = dict(zip(names, args)) | {k: kwargs[k] for k in names if k in kwargs}
        if kwargs.get("cache") is not None:
            raise ValueError("capture_attention: calls with a K/V cache (incremental decoding) are not captured; "
                             "run the model on the whole sequence at once")
        query = given["query"].detach()
        key = query if given.get("key") is None or given["key"] is given["query"] else given["key"].detach()
        value = key if given.get("value") is None or given["value"] is given.get("key") else given["value"].detach()
        calls.append(AttentionCall(module, query, key, value, given.get("mask")))

    handles = [m.register_forward_pre_hook(hook, with_kwargs=True)
               for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not handles:
        raise ValueError(f"capture_attention: {type(model).__name__} has no MultiHeadAttention module")
    try:
        run()
    finally:
        for h in handles:
            h.remove()
    return calls


def _projections(m: MultiHeadAttention, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """W^q query, W^k key, W^v value with the module's weights: (B, L, d_model) each."""
    if not m.packed:
        return m.q_proj(query), m.k_proj(key), m.v_proj(value)
    d, w, b = m.d_model, m.in_proj.weight, m.in_proj.bias  # rows of w: W^q; W^k; W^v
    part = (lambda s: None) if b is None else (lambda s: b[s])
    return (F.linear(query, w[:d], part(slice(0, d))), F.linear(key, w[d:2 * d], part(slice(d, 2 * d))),
            F.linear(value, w[2 * d:], part(slice(2 * d, None))))


@torch.no_grad()
def head_parts(call: AttentionCall, example: int = 0) -> LayerParts:
    """The call's q, k, v per head for batch row ``example``, recomputed from its inputs."""
    m = call.module
    q, k, v = _projections(m, call.query, call.key, call.value)
    b, h, dh = q.shape[0], m.num_heads, m.head_dim
    q, k, v = (t.view(b, t.shape[1], h, dh).transpose(1, 2) for t in (q, k, v))  # (B, L, d) -> (B, H, L, dh)
    if m.position is not None:
        if m.position.needs_weights:
            raise ValueError(f"head_parts: {type(m.position).__name__} adds to the values; the lecture view "
                             "draws plain q . k attention only")
        q, k, bias = m.position(q, k)
        if bias is not None:
            raise ValueError(f"head_parts: {type(m.position).__name__} adds a bias to the scores; the lecture "
                             "view draws plain q . k / sqrt(d) scores only")
    out = m.out_proj
    return LayerParts(q[example].float(), k[example].float(), v[example].float(), out.weight.detach().float(),
                      None if out.bias is None else out.bias.detach().float(), call_mask(call, example))


def call_mask(call: AttentionCall, example: int = 0) -> Tensor | None:
    """The call's mask for batch row ``example`` as (Lq, Lk) bool, True = may attend; None when every key is seen."""
    if call.mask is None:
        return None
    from ..functional.masks import as_mask

    lq, lk = call.query.shape[1], call.key.shape[1]
    dense = for_heads(as_mask(call.mask)).materialize(lq, lk, 4, call.query.device)  # (B or 1, 1, Lq or 1, Lk)
    mask = dense[example if dense.shape[0] > 1 else 0, 0].expand(lq, lk).clone()
    return None if bool(mask.all()) else mask


@torch.no_grad()
def explain_layer(parts: LayerParts, scale: float | None = None) -> tuple[Intermediates, Tensor, Tensor]:
    """The lecture's chain for every head: ``attnkit.explain`` (scaled dot, softmax), then W^o.

    Returns (intermediates with (H, Lq, ...) tensors, merged output o (Lq, d_out), and each head's share
    ||W^o_h b^{i,h}|| (H, Lq): how much head h adds to token i's output). Without W^o (``w_o`` None, the
    lecture's single head) o^i is the heads' b^i side by side (one head: b^i itself), each share ||b^{i,h}||.
    """
    ex = explain(parts.q, parts.k, parts.v, parts.mask, score="scaled_dot", scale=scale)
    h, lq, dv = ex.out.shape
    if parts.w_o is None:
        return ex, ex.out.transpose(0, 1).reshape(lq, h * dv), ex.out.norm(dim=-1)  # (H, Lq, dv) -> (Lq, H * dv)
    blocks = parts.w_o.view(parts.w_o.shape[0], h, dv)  # (d_out, H * dv) -> (d_out, H, dv)
    contrib = torch.einsum("ohd,hid->hio", blocks, ex.out)  # W^o_h b^{i,h}: (H, Lq, d_out)
    merged = contrib.sum(0) + (0 if parts.b_o is None else parts.b_o)  # (Lq, d_out)
    return ex, merged, contrib.norm(dim=-1)
