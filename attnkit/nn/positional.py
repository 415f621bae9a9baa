"""Positional-encoding modules.

Two kinds:
- *input* encodings add a vector per position to the input (``Sinusoidal``, ``LearnedAbsolute``):
  ``forward(x, offset=0)`` with x (B, L, d).
- *attention* encodings act inside each attention layer (``Rotary``, ``ALiBi``,
  ``RelativePosition``): ``forward(q, k) -> (q, k, bias)`` with q (B, H, Lq, dh), k (B, H, Lk, dh),
  bias None or broadcastable to (B, H, Lq, Lk). Query positions are aligned to the end of the keys,
  so a K/V cache works unchanged.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..functional.bias import ALiBiBias
from ..functional.positional import (
    alibi_slopes,
    apply_rotary,
    relative_distances,
    rotary_cos_sin,
    sinusoidal_table,
)
from .config import TransformerConfig

__all__ = ["Sinusoidal", "LearnedAbsolute", "Rotary", "ALiBi", "RelativePosition", "AttentionPosition",
           "input_position", "attention_position"]


class Sinusoidal(nn.Module):
    """x + P[offset : offset + L] with d2l's table (``layout="halves"``: sines then cosines, as Marian).
    Extends itself past ``max_len`` when needed."""

    def __init__(self, d_model: int, max_len: int = 512, base: float = 10000.0, *, layout: str = "interleaved",
                 device=None, dtype=None):
        super().__init__()
        self.d_model, self.base, self.layout = d_model, base, layout
        self.register_buffer("table", sinusoidal_table(max_len, d_model, base, layout=layout, device=device,
                                                       dtype=dtype), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.shape[-2]
        if end > self.table.shape[0]:  # a pure function of position: grow instead of failing
            self.table = sinusoidal_table(max(end, 2 * self.table.shape[0]), self.d_model, self.base,
                                          layout=self.layout, device=self.table.device, dtype=self.table.dtype)
        rows = self.table[offset:end]
        return x + (rows if rows.dtype == x.dtype else rows.to(x.dtype))  # (B, L, d)


class LearnedAbsolute(nn.Module):
    """x + E[offset : offset + L], a learned table of ``max_len`` rows."""

    def __init__(self, d_model: int, max_len: int = 512, *, device=None, dtype=None):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model, device=device, dtype=dtype)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.shape[-2]
        if end > self.max_len:
            raise ValueError(f"LearnedAbsolute: sequence needs positions up to {end} but the learned table "
                             f"has max_len={self.max_len} (input shape {tuple(x.shape)}, offset {offset})")
        pos = torch.arange(offset, end, device=x.device)
        return x + self.embedding(pos)


class AttentionPosition(nn.Module):
    """Base of the in-attention encodings. ``needs_weights``: the value term needs the weights."""

    needs_weights = False

    def forward(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        raise NotImplementedError

    def values(self, weights: Tensor) -> Tensor | None:
        return None


class Rotary(AttentionPosition):
    """RoPE (Su et al. 2021): rotate q and k so q.k depends on the distance only."""

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        self.head_dim, self.base = head_dim, base

    def forward(self, q, k):
        lq, lk = q.shape[-2], k.shape[-2]
        cos, sin = rotary_cos_sin(torch.arange(lk, device=k.device), self.head_dim, self.base)  # (Lk, dh/2)
        return apply_rotary(q, cos[lk - lq:], sin[lk - lq:]), apply_rotary(k, cos, sin), None


class ALiBi(AttentionPosition):
    """ALiBi (Press et al. 2022): bias -slope_h * |i - j| on the scores, no embeddings.

    ``forward`` returns a structured ``ALiBiBias`` (never an (H, Lq, Lk) tensor): dense backends
    materialise it, the chunked backend computes it per tile, so long sequences stay linear in memory.
    """

    def __init__(self, num_heads: int):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def forward(self, q, k):
        return q, k, ALiBiBias(self.slopes.to(q.device))  # materialises to (H, Lq, Lk)


class RelativePosition(AttentionPosition):
    """Shaw et al. 2018: learned embeddings a^K, a^V of the clipped distance j - i in [-k, k].

    scores_ij += q_i . a^K_ij * scale;  out_i += sum_j w_ij a^V_ij (when ``values`` is True).
    """

    def __init__(self, head_dim: int, max_distance: int = 16, values: bool = True, *, device=None, dtype=None):
        super().__init__()
        self.max_distance, self.scale = max_distance, head_dim ** -0.5
        self.keys = nn.Embedding(2 * max_distance + 1, head_dim, device=device, dtype=dtype)
        self.vals = nn.Embedding(2 * max_distance + 1, head_dim, device=device, dtype=dtype) if values else None
        self.needs_weights = values

    def forward(self, q, k):
        rel = relative_distances(q.shape[-2], k.shape[-2], self.max_distance, q.device)  # (Lq, Lk)
        a_k = self.keys(rel)  # (Lq, Lk, dh)
        bias = torch.einsum("bhqd,qkd->bhqk", q, a_k) * self.scale  # (B, H, Lq, Lk)
        return q, k, bias

    def values(self, weights):
        if self.vals is None:
            return None
        rel = relative_distances(weights.shape[-2], weights.shape[-1], self.max_distance, weights.device)
        return torch.einsum("bhqk,qkd->bhqd", weights, self.vals(rel))  # (B, H, Lq, dh)


def input_position(config: TransformerConfig, *, device=None, dtype=None) -> nn.Module | None:
    """The input-level encoding the config names, or None."""
    if config.positional == "sinusoidal":
        return Sinusoidal(config.d_model, config.max_len, layout=config.sinusoidal_layout, device=device, dtype=dtype)
    if config.positional == "learned":
        return LearnedAbsolute(config.d_model, config.max_len, device=device, dtype=dtype)
    return None


def attention_position(config: TransformerConfig, *, device=None, dtype=None) -> AttentionPosition | None:
    """A fresh in-attention encoding for one self-attention layer, or None."""
    if config.positional == "rope":
        return Rotary(config.head_dim)
    if config.positional == "alibi":
        return ALiBi(config.num_heads)
    if config.positional == "relative":
        return RelativePosition(config.head_dim, config.max_relative_distance, device=device, dtype=dtype)
    return None
