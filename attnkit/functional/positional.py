"""Positional tables as pure functions: sinusoidal (d2l / the paper), rotary (RoPE), ALiBi, and
clipped relative distances (Shaw et al. 2018). Positions of queries are aligned to the end of the
keys, as in ``attnkit.masks`` (``i' = i + Lk - Lq``), so a K/V cache needs no special case.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

SINUSOIDAL_LAYOUTS = ("interleaved", "halves")

__all__ = ["SINUSOIDAL_LAYOUTS", "sinusoidal_table", "rotary_cos_sin", "apply_rotary", "alibi_slopes", "alibi_bias",
           "relative_distances"]


def sinusoidal_table(length: int, dim: int, base: float = 10000.0, *, layout: str = "interleaved",
                     device=None, dtype=None) -> Tensor:
    """P (length, dim) of sin(i w_j) and cos(i w_j) with w_j = base^(-2j/dim), j < dim/2.

    ``layout="interleaved"`` (d2l, the paper): P[i, 2j] = sin(i w_j), P[i, 2j+1] = cos(i w_j).
    ``layout="halves"`` (tensor2tensor, fairseq, Marian): P[i, j] = sin(i w_j), P[i, dim/2 + j] = cos(i w_j).
    """
    if dim % 2:
        raise ValueError(f"sinusoidal_table: `dim` must be even, got {dim}")
    if layout not in SINUSOIDAL_LAYOUTS:
        raise ValueError(f"sinusoidal_table: `layout` must be one of {SINUSOIDAL_LAYOUTS}, got {layout!r}")
    pos = torch.arange(length, device=device, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    freq = base ** (-torch.arange(0, dim, 2, device=device, dtype=torch.float64) / dim)  # (dim/2,)
    angle = pos * freq  # (L, dim/2)
    if layout == "halves":
        table = torch.cat((angle.sin(), angle.cos()), dim=-1)  # (L, dim): all sines, then all cosines
    else:
        table = torch.stack((angle.sin(), angle.cos()), dim=-1).reshape(length, dim)  # (L, dim/2, 2) -> (L, dim)
    return table.to(dtype or torch.get_default_dtype())


def rotary_cos_sin(positions: Tensor, dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """cos, sin tables (L, dim/2) for rotary embeddings at integer ``positions`` (L,)."""
    if dim % 2:
        raise ValueError(f"rotary: head dim must be even, got {dim}")
    inv = base ** (-torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) / dim)
    angle = positions.float().unsqueeze(-1) * inv  # (L, dim/2)
    return angle.cos(), angle.sin()


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair (x[..., j], x[..., j + d/2]) by the angle for its position.

    x (..., L, d), cos/sin (L, d/2)  ->  (..., L, d). Dot products of rotated q and k depend only
    on the distance between their positions.
    """
    x1, x2 = x.chunk(2, dim=-1)  # (..., L, d/2) each
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)


def alibi_slopes(num_heads: int) -> Tensor:
    """ALiBi's head slopes: a geometric sequence 2^(-8/n), ... (Press et al. 2022), with the paper's
    interleaving rule when ``num_heads`` is not a power of two."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = power_of_two(num_heads)
    else:
        closest = 2 ** math.floor(math.log2(num_heads))
        slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes)


def alibi_bias(slopes: Tensor, lq: int, lk: int) -> Tensor:
    """Bias (H, Lq, Lk) = -slope_h * |i' - j|: linearly penalise distant keys."""
    i = torch.arange(lq, device=slopes.device).unsqueeze(1) + (lk - lq)  # (Lq, 1)
    j = torch.arange(lk, device=slopes.device).unsqueeze(0)  # (1, Lk)
    dist = (i - j).abs().to(slopes.dtype)  # (Lq, Lk)
    return -slopes.view(-1, 1, 1) * dist  # (H, Lq, Lk)


def relative_distances(lq: int, lk: int, max_distance: int, device=None) -> Tensor:
    """Index (Lq, Lk) of clip(j - i', -k, k) + k in [0, 2k], for Shaw et al.'s embeddings."""
    i = torch.arange(lq, device=device).unsqueeze(1) + (lk - lq)
    j = torch.arange(lk, device=device).unsqueeze(0)
    return (j - i).clamp(-max_distance, max_distance) + max_distance
