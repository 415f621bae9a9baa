"""Multi-head attention: project, split heads, ``attnkit.attention``, merge heads, project out."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..functional import attention
from ..functional.masks import Mask, for_heads
from .positional import AttentionPosition

__all__ = ["MultiHeadAttention", "KVCache", "AttentionOutput"]


class KVCache(NamedTuple):
    """Projected keys and values (B, H, L, dh) kept between decoding steps.

    ``static``: cross-attention memory, projected once and reused as is.
    """

    k: Tensor
    v: Tensor
    static: bool = False

    @property
    def length(self) -> int:
        return self.k.shape[-2]


class AttentionOutput(NamedTuple):
    out: Tensor  # (B, Lq, d_model)
    weights: Tensor | None  # (B, H, Lq, Lk) when requested
    cache: KVCache | None  # when a cache was passed in or requested


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention (self or cross), W^o on the concatenated heads.

    Args:
        d_model: model width (query size and output size).
        num_heads: h; d_model must divide by it. Each head has size d_model / h.
        kdim, vdim: key / value input sizes for cross-attention (default d_model). When both equal
            d_model, W^q, W^k, W^v are one packed (3 d_model, d_model) weight, as in torch.
        bias: biases on the projections.
        dropout: dropout on the attention weights while training.
        position: an in-attention positional encoding (``attnkit.nn.positional``), for self-attention.
    """

    def __init__(self, d_model: int, num_heads: int, *, kdim: int | None = None, vdim: int | None = None,
                 bias: bool = True, dropout: float = 0.0, position: AttentionPosition | None = None,
                 device=None, dtype=None):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: `d_model` ({d_model}) must be divisible by "
                             f"`num_heads` ({num_heads})")
        fk = {"device": device, "dtype": dtype}
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        self.kdim, self.vdim = kdim or d_model, vdim or d_model
        self.dropout = dropout
        self.packed = self.kdim == d_model and self.vdim == d_model
        if self.packed:
            self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias, **fk)  # rows: W^q; W^k; W^v
        else:
            self.q_proj = nn.Linear(d_model, d_model, bias=bias, **fk)
            self.k_proj = nn.Linear(self.kdim, d_model, bias=bias, **fk)
            self.v_proj = nn.Linear(self.vdim, d_model, bias=bias, **fk)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias, **fk)  # W^o
        self.position = position
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for lin in ([self.in_proj] if self.packed else [self.q_proj, self.k_proj, self.v_proj]):
            nn.init.xavier_uniform_(lin.weight)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
        if self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)

    def _split(self, x: Tensor) -> Tensor:
        b, l, _ = x.shape
        return x.view(b, l, self.num_heads, self.head_dim).transpose(1, 2)  # (B, L, d) -> (B, H, L, dh)

    def _project(self, query: Tensor, key: Tensor | None, value: Tensor | None) -> tuple[Tensor, ...]:
        """Returns q, k, v as (B, L, d_model); k, v None when ``key`` is None (reuse a static cache)."""
        if not self.packed:
            q = self.q_proj(query)
            return q, *((self.k_proj(key), self.v_proj(value)) if key is not None else (None, None))
        w, b = self.in_proj.weight, self.in_proj.bias
        if key is query and value is query:  # self-attention: one fused matmul
            return self.in_proj(query).chunk(3, dim=-1)
        d = self.d_model
        q = F.linear(query, w[:d], None if b is None else b[:d])
        if key is None:
            return q, None, None
        if key is value:
            k, v = F.linear(key, w[d:], None if b is None else b[d:]).chunk(2, dim=-1)
            return q, k, v
        k = F.linear(key, w[d:2 * d], None if b is None else b[d:2 * d])
        v = F.linear(value, w[2 * d:], None if b is None else b[2 * d:])
        return q, k, v

    def _check(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        for name, t, dim in (("query", query, self.d_model), ("key", key, self.kdim), ("value", value, self.vdim)):
            if t.dim() != 3 or t.shape[-1] != dim:
                raise ValueError(f"MultiHeadAttention: `{name}` must have shape (B, L, {dim}), got {tuple(t.shape)}")
        if not (query.shape[0] == key.shape[0] == value.shape[0]):
            raise ValueError(f"MultiHeadAttention: batch sizes differ: query {tuple(query.shape)}, "
                             f"key {tuple(key.shape)}, value {tuple(value.shape)}")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"MultiHeadAttention: key and value lengths differ: "
                             f"{tuple(key.shape)} vs {tuple(value.shape)}")

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                mask: Mask | Tensor | None = None, *, need_weights: bool = False,
                cache: KVCache | None = None, use_cache: bool = False, backend: str | None = None
                ) -> AttentionOutput:
        """query (B, Lq, d_model); key (B, Lk, kdim) and value (B, Lk, vdim), default = query.

        ``mask``: True = may attend; an attnkit mask or a bool tensor (Lq, Lk) / (B, Lq, Lk),
        broadcast over heads. With a cache, Lk counts the cached keys too.
        ``cache``/``use_cache``: incremental decoding; the returned cache holds all keys so far.
        Returns ``AttentionOutput(out (B, Lq, d_model), weights (B, H, Lq, Lk) | None, cache | None)``.
        """
        is_self = key is None or key is query
        key = query if key is None else key
        value = key if value is None else value
        static = cache is not None and cache.static
        if not static:
            self._check(query, key, value)
        q, k, v = self._project(query, None if static else key, None if static else value)
        q = self._split(q)  # (B, H, Lq, dh)
        if static:
            k, v = cache.k, cache.v
        else:
            k, v = self._split(k), self._split(v)  # (B, H, Lk, dh)
            if cache is not None:
                k, v = torch.cat((cache.k, k), dim=-2), torch.cat((cache.v, v), dim=-2)
        new_cache = KVCache(k, v, static=static or not is_self) if (use_cache or cache is not None) else None

        bias = None
        if self.position is not None:
            q, k, bias = self.position(q, k)
        want = need_weights or (self.position is not None and self.position.needs_weights)
        out, weights = self.attend(q, k, v, for_heads(mask), bias, want, backend)  # out: (B, H, Lq, dh)
        if self.position is not None and weights is not None:
            extra = self.position.values(weights)
            if extra is not None:
                out = out + extra
        b, _, lq, _ = out.shape
        out = out.transpose(1, 2).reshape(b, lq, self.d_model)  # (B, H, Lq, dh) -> (B, Lq, d_model)
        return AttentionOutput(self.out_proj(out), weights if need_weights else None, new_cache)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, need_weights: bool,
               backend: str | None) -> tuple[Tensor, Tensor | None]:
        """The attention step on split heads: q (B, H, Lq, dh), k (B, H, Lk, dh), v (B, H, Lk, dh) ->
        (out (B, H, Lq, dh), weights (B, H, Lq, Lk) or None). The efficient variants override it."""
        res = attention(q, k, v, mask, bias=bias, dropout_p=self.dropout if self.training else 0.0,
                        return_weights=need_weights, backend=backend)
        return res if need_weights else (res, None)
