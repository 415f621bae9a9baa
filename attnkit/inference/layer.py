"""One Transformer layer, packed: the program that the encoder, an autoregressive step and a NAT pass all run.

``PackedLayer(layer, settings)`` holds a spec ``Layer``'s weights as ``PackedLinear`` (the feed-forward's
activation inside ``ff1``'s kernel, the residual sums inside the output projections' kernels) and runs it on
N rows of d features:

    post-LN (norm_first false)                     pre-LN (norm_first true)
    q, k, v = x W_qkv + b                          q, k, v = LN1(x) W_qkv + b
    x = LN1(x + attend(q, k, v) W_o + b)           x = x + attend(q, k, v) W_o + b
    [x = LN2(x + cross(x W_cq + b) W_co + b)]      [x = x + cross(LN2(x) W_cq + b) W_co + b]
    x = LNf(x + act(x W_1 + b) W_2 + b)            x = x + act(LNf(x) W_1 + b) W_2 + b

What differs between the engines is only where the keys come from: each engine passes ``attend_self`` (the
packed q, k, v rows -> attention's output, heads merged: a row's own positions, or the step's K/V cache) and,
for a decoder layer, ``attend_memory`` (the queries -> attention over the memory's keys and values). The
``nn`` modules (``nn/blocks.py``) are the reference of this program; it is the reference of the native
compositions (``inference/native``), which run the same kernels in one call.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..functional import native
from ..functional.attention import attention, step_kernel
from ..functional.dispatch import SHORT_MAX_LEN
from ..functional.masks import Mask, for_heads, padding
from ..functional.masks.readers import full_parts
from ..functional.positional import apply_rotary
from .packed import PackedLinear
from .spec import Layer, Norm, Settings

__all__ = ["PackedLayer", "Attend", "self_attention", "memory_attention", "short_kernel", "kernel_lengths",
           "through_rows"]


class PackedLayer:
    """A spec ``Layer`` packed for the engines (see the module doc). ``cross_kv``: the cross-attention's K, V
    projection, left as a spec ``Linear``: an engine projects the memory by every layer's at once.
    ``make_linear``: (spec ``Linear``, activation) -> the layer's linear layers (``quant_linear.QuantLayer``'s
    takes int8 weights too)."""

    make_linear: Callable[..., PackedLinear] = PackedLinear

    def __init__(self, layer: Layer, settings: Settings):
        d, lin = settings.d_model, self.make_linear
        self.num_heads, self.head_dim, self.norm_first = settings.num_heads, settings.head_dim, settings.norm_first
        self.qkv = lin(layer.qkv)  # (3d, d)
        self.self_out = lin(layer.self_out)
        cross = layer.cross
        self.cross_q = lin(cross.qkv.rows(0, d)) if cross else None
        self.cross_kv = cross.qkv.rows(d, 3 * d) if cross else None  # (2d, d)
        self.cross_out = lin(cross.out) if cross else None
        self.ff1 = lin(layer.ff1, settings.activation)  # the activation inside the kernel
        self.ff2 = lin(layer.ff2)
        self.norms: tuple[Norm, ...] = ((layer.self_norm, cross.norm, layer.ff_norm) if cross
                                        else (layer.self_norm, layer.ff_norm))

    @property
    def cross(self) -> bool:
        return self.cross_q is not None

    def linears(self) -> list[PackedLinear]:
        """The linear layers in the native compositions' order: qkv, self_out, [cross_q, cross_out,] ff1, ff2."""
        middle = [self.cross_q, self.cross_out] if self.cross else []
        return [self.qkv, self.self_out, *middle, self.ff1, self.ff2]

    def __call__(self, x: Tensor, attend_self: Callable[[Tensor], Tensor],
                 attend_memory: Callable[[Tensor], Tensor] | None = None) -> Tensor:
        """x (N, d) -> (N, d). ``attend_self``: q, k, v rows (N, 3d) -> (N, d); ``attend_memory``: queries (N, d)
        -> (N, d) (a decoder layer's cross-attention)."""
        pre, n1 = self.norm_first, self.norms[0]
        qkv = self.normed(self.qkv, x, n1) if pre else self.qkv.rows(x)  # (N, 3d)
        return self.after_self(self.residual(self.self_out, attend_self(qkv), x, n1), attend_memory)

    def after_self(self, x: Tensor, attend_memory: Callable[[Tensor], Tensor] | None = None) -> Tensor:
        """The sublayers after self-attention (cross-attention, the feed-forward): x (N, d) -> (N, d)."""
        pre, nf = self.norm_first, self.norms[-1]
        if self.cross:
            n2 = self.norms[1]
            q = self.normed(self.cross_q, x, n2) if pre else self.cross_q.rows(x)  # (N, d)
            x = self.residual(self.cross_out, attend_memory(q), x, n2)
        f = self.normed(self.ff1, x, nf) if pre else self.ff1.rows(x)  # (N, d_ff), the activation in the kernel
        return self.residual(self.ff2, f, x, nf)

    def normed(self, linear: PackedLinear, x: Tensor, norm: Norm) -> Tensor:
        """Pre-LN's act(norm(x) W^T + b): x (N, in) -> (N, out), the norm, then the linear layer's rows."""
        return linear.rows(norm(x))

    def residual(self, linear: PackedLinear, y: Tensor, x: Tensor, norm: Norm) -> Tensor:
        """Pre-LN: x + linear(y); post-LN: norm(x + linear(y)). y (N, in), x (N, d) -> (N, d): the sum inside
        the linear kernel, with an affine LayerNorm at a few rows the norm too (``PackedLinear.add_norm``)."""
        return linear.add(y, x) if self.norm_first else linear.add_norm(y, x, norm)


Attend = Callable[[Tensor, Tensor, Tensor], Tensor]  # q, k, v (N, H, L, dh) -> (N, H, Lq, dh)


def self_attention(attend: Attend, qkv: Tensor, b: int, t: int, h: int, dh: int,
                   rotary: tuple[Tensor, Tensor] | None = None) -> Tensor:
    """qkv (B*T, 3d) -> each position's attention over its row's T positions, heads merged: (B*T, d).
    ``rotary``: the cos, sin tables (T, dh / 2) of rotary positions: q and k rotated first, in one pass."""
    x = qkv.view(b, t, 3, h, dh)  # (B, T, 3, H, dh)
    qk = x[:, :, :2]
    if rotary is not None:
        cos, sin = (c[:, None, None] for c in rotary)  # (T, 1, 1, dh/2)
        qk = apply_rotary(qk, cos, sin)
    q, k = qk.permute(2, 0, 3, 1, 4).unbind(0)  # (B, T, 2, H, dh) -> 2 x (B, H, T, dh)
    v = x[:, :, 2].transpose(1, 2)  # (B, H, T, dh)
    return attend(q, k, v).transpose(1, 2).reshape(b * t, h * dh)  # (B, H, T, dh) -> (B*T, d)


def memory_attention(attend: Callable[[Tensor], Tensor], q: Tensor, rows: int, per: int, h: int, dh: int) -> Tensor:
    """q (N, d), N = rows * per: the ``per`` queries of each memory row (its positions, or a sentence's beams)
    -> (N, d). ``attend``: q (rows, H, per, dh) -> (rows, H, per, dh) against that row's keys and values."""
    o = attend(q.view(rows, per, h, dh).transpose(1, 2))  # (rows, per, H, dh) -> (rows, H, per, dh)
    return o.transpose(1, 2).reshape(rows * per, h * dh)


class ShortAttention:
    """Attention of q (N, H, Lq, dh) over k, v (N, H, Lk, dh) for the decoders: the "short" backend's kernel
    where the automatic choice would run it (``attention.step_kernel``: ``attention``'s checks made once, on
    example inputs; the shapes are the engine's own), else ``attnkit.attention``. The kernel writes (N, Lq, H, dh)
    memory, so merging the heads is free."""

    def __init__(self, dtype: torch.dtype, head_dim: int):
        self.kernel = short_kernel(dtype, head_dim)
        self.scale = head_dim ** -0.5
        self.no_lengths = native.lengths_arg(None)

    def __call__(self, q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, lens: Tensor | None,
                 rows: Tensor | None = None) -> Tensor:
        """``lens``: the mask's key lengths as the kernel takes them (``kernel_lengths``; None: a mask it does
        not take). ``rows``: a row table (N, >= Lk): key j of row n is that of row rows[n, j] of k and v
        (``through_rows``)."""
        if self.kernel is not None and lens is not None and k.shape[2] <= SHORT_MAX_LEN:
            return self.kernel(q, k, v, lens, self.no_lengths, self.scale, rows)
        if rows is not None:
            k, v = through_rows(k, rows), through_rows(v, rows)
        return attention(q, k, v, mask)


def through_rows(k: Tensor, rows: Tensor) -> Tensor:
    """k (N', H, L, d) read through a row table rows (N, >= L) int64 -> (N, H, L, d): position j of row n is
    position j of row rows[n, j] (the short kernel's ``rows``, a beam search's K/V cache)."""
    n = k.shape[2]
    picked = k.transpose(1, 2)[rows[:, :n], torch.arange(n, device=k.device)]  # (N, L, H, d)
    return picked.transpose(1, 2)


def short_kernel(dtype: torch.dtype, head_dim: int):
    """The "short" backend's raw kernel for heads of ``head_dim`` in ``dtype`` (``attention.step_kernel``,
    checked on example inputs of that kind), or None where that backend does not run."""
    example = torch.zeros(1, 1, 1, head_dim, dtype=dtype)  # (B, H, L, dh)
    try:
        with torch.no_grad():
            return step_kernel("short", example, example, example, for_heads(padding(torch.ones(1, dtype=torch.long))))
    except ValueError:
        return None


def kernel_lengths(mask: Mask | None) -> Tensor | None:
    """A key mask -> the key lengths the native kernels take (empty: no mask), or None for another kind of mask."""
    parts = full_parts(mask)
    if parts is None or parts[1] is not None:
        return None
    return native.lengths_arg(parts[0])
