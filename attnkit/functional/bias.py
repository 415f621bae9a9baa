"""Structured score biases: position biases computed per block instead of stored as (H, Lq, Lk).

A ``Bias`` is added to the scaled scores, like a plain ``bias`` tensor. Dense backends call
``materialize(lq, lk, device, dtype)`` and get a (H or 1, Lq, Lk) tensor; blocked backends
(``chunked``) call ``block(q_start, q_end, k_start, k_end, lq, lk, device, dtype)`` and never
hold more than one (H or 1, bq, bk) tile, so memory stays linear in L.

Positions follow ``attnkit.masks``: query ``i`` sits at ``i' = i + (Lk - Lq)`` (aligned to the end
of the keys). The leading H broadcasts against the head dim of (B, H, Lq, Lk) scores; inputs
without a head dim ((B, L, d) or (L, d)) need a bias with H = 1.

Gradients: tensors returned by ``parameters()`` (e.g. a learned relative table) get gradients
from every backend; blocked backends recompute the tile and call autograd on it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Bias", "TensorBias", "ALiBiBias", "RelativeBias", "EdgeBias", "as_bias",
           "materialize_bias", "t5_buckets"]


class Bias:
    """Base class. Subclasses implement ``block`` (and may override ``materialize``)."""

    #: number of heads H, or None when the bias is shared by all heads (leading dim 1)
    num_heads: int | None = None

    def block(self, q_start: int, q_end: int, k_start: int, k_end: int, lq: int, lk: int,
              device=None, dtype=None) -> Tensor:
        """The tile (H or 1, q_end - q_start, k_end - k_start) of the full (H or 1, Lq, Lk) bias."""
        raise NotImplementedError

    def materialize(self, lq: int, lk: int, device=None, dtype=None) -> Tensor:
        """The dense bias (H or 1, Lq, Lk)."""
        return self.block(0, lq, 0, lk, lq, lk, device, dtype)

    def validate(self, q: Tensor, k: Tensor) -> None:
        """Raise ValueError if this bias cannot apply to q (..., Lq, d), k (..., Lk, d)."""
        h = self.num_heads
        if h is not None and h > 1 and (q.dim() < 3 or q.shape[-3] != h):
            raise ValueError(f"attention: `bias` {type(self).__name__} has {h} heads but q has shape "
                             f"{tuple(q.shape)}; expected (..., H={h}, Lq, d)")

    def parameters(self) -> tuple[Tensor, ...]:
        """Tensor fields that require grad (the chunked kernel differentiates tiles w.r.t. these)."""
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self)
                     if isinstance(getattr(self, f.name), Tensor) and getattr(self, f.name).requires_grad)

    def rebind(self, tensors: tuple[Tensor, ...]) -> Bias:
        """A copy whose ``parameters()`` are replaced by ``tensors`` (same order)."""
        it = iter(tensors)
        changes = {f.name: next(it) for f in dataclasses.fields(self)
                   if isinstance(getattr(self, f.name), Tensor) and getattr(self, f.name).requires_grad}
        return dataclasses.replace(self, **changes)


def _describe(t) -> str:
    return f"{t.dtype} tensor of shape {tuple(t.shape)}" if isinstance(t, Tensor) else type(t).__name__


def _positions(q_start, q_end, k_start, k_end, lq, lk, device):
    """(i', j) grids (bq, 1) and (1, bk) for the tile, queries aligned to the end of the keys."""
    i = torch.arange(q_start, q_end, device=device).unsqueeze(1) + (lk - lq)  # (bq, 1)
    j = torch.arange(k_start, k_end, device=device).unsqueeze(0)  # (1, bk)
    return i, j


@dataclass(frozen=True, eq=False)
class TensorBias(Bias):
    """A plain tensor broadcastable to (..., Lq, Lk), wrapped so blocked kernels can slice it.

    ``block`` returns the slice with the tensor's own leading dims (it is not forced to 3 dims).
    """

    tensor: Tensor

    def block(self, q_start, q_end, k_start, k_end, lq, lk, device=None, dtype=None):
        t = self.tensor
        rows = slice(None) if t.dim() < 2 or t.shape[-2] == 1 else slice(q_start, q_end)
        cols = slice(None) if t.shape[-1] == 1 else slice(k_start, k_end)
        tile = t[..., rows, cols] if t.dim() >= 2 else t[..., cols]
        return tile.to(device=device, dtype=dtype)

    def materialize(self, lq, lk, device=None, dtype=None):
        return self.tensor.to(device=device, dtype=dtype)

    def validate(self, q, k):
        pass


@dataclass(frozen=True, eq=False)
class ALiBiBias(Bias):
    """ALiBi (Press et al. 2022): bias[h, i, j] = -slopes[h] * |i' - j|. ``slopes``: (H,)."""

    slopes: Tensor

    def __post_init__(self):
        s = self.slopes
        if not isinstance(s, Tensor) or s.dim() != 1 or not s.dtype.is_floating_point:
            raise ValueError(f"ALiBiBias: `slopes` must be a 1-D float tensor (H,), got {_describe(s)}")

    @property
    def num_heads(self) -> int:
        return self.slopes.shape[0]

    def block(self, q_start, q_end, k_start, k_end, lq, lk, device=None, dtype=None):
        device = self.slopes.device if device is None else device
        i, j = _positions(q_start, q_end, k_start, k_end, lq, lk, device)
        dist = (i - j).abs().to(torch.float32)  # (bq, bk)
        tile = -self.slopes.to(device=device, dtype=torch.float32).view(-1, 1, 1) * dist  # (H, bq, bk)
        return tile.to(dtype or self.slopes.dtype)


def t5_buckets(rel: Tensor, num_buckets: int = 32, max_distance: int = 128,
               bidirectional: bool = True) -> Tensor:
    """T5's bucket of each relative distance ``rel = j - i'``: exact for small distances,
    logarithmic up to ``max_distance``, then clipped. Returns integers in [0, num_buckets)."""
    out = torch.zeros_like(rel)
    n = num_buckets
    if bidirectional:
        n //= 2
        out = out + (rel > 0).long() * n
        rel = rel.abs()
    else:
        rel = (-rel).clamp(min=0)
    exact = n // 2
    large = exact + (torch.log(rel.float().clamp(min=1) / exact) / math.log(max_distance / exact)
                     * (n - exact)).long()
    large = large.clamp(max=n - 1)
    return out + torch.where(rel < exact, rel, large)


@dataclass(frozen=True, eq=False)
class RelativeBias(Bias):
    """A learned per-head scalar per relative distance: bias[h, i, j] = table[h, bucket(j - i')].

    ``table``: (H, num_buckets). ``mode="clip"``: bucket = clip(j - i', -k, k) + k with
    num_buckets = 2k + 1 (Shaw et al.'s clipping). ``mode="t5"``: T5's log buckets
    (``t5_buckets`` with ``max_distance`` and ``bidirectional``).
    """

    table: Tensor
    mode: str = "clip"
    max_distance: int = 128
    bidirectional: bool = True

    def __post_init__(self):
        t = self.table
        if not isinstance(t, Tensor) or t.dim() != 2 or not t.dtype.is_floating_point:
            raise ValueError(f"RelativeBias: `table` must be a 2-D float tensor (H, num_buckets), "
                             f"got {_describe(t)}")
        if self.mode not in ("clip", "t5"):
            raise ValueError(f"RelativeBias: `mode` must be 'clip' or 't5', got {self.mode!r}")
        if self.mode == "clip" and t.shape[1] % 2 == 0:
            raise ValueError(f"RelativeBias: mode='clip' needs an odd number of buckets 2k+1, "
                             f"got {t.shape[1]}")

    @property
    def num_heads(self) -> int:
        return self.table.shape[0]

    def block(self, q_start, q_end, k_start, k_end, lq, lk, device=None, dtype=None):
        device = self.table.device if device is None else device
        if self.mode == "clip":
            k = (self.table.shape[1] - 1) // 2
            i, j = _positions(q_start, q_end, k_start, k_end, lq, lk, device)
            idx = (j - i).clamp(-k, k) + k  # (bq, bk)
        else:
            i, j = _positions(q_start, q_end, k_start, k_end, lq, lk, device)
            idx = t5_buckets(j - i, self.table.shape[1], self.max_distance, self.bidirectional)  # (bq, bk)
        tile = self.table.to(device)[:, idx]  # (H, bq, bk)
        return tile if dtype is None else tile.to(dtype)


@dataclass(frozen=True, eq=False)
class EdgeBias(Bias):
    """A bias on the edges of a graph mask (edge features as scores).

    ``edge_index`` (2, E) as in ``attnkit.masks.graph``; ``values`` (E,) or (E, H). Duplicate
    edges add up. Off-edge entries of ``materialize`` are 0 (the graph mask hides them anyway).
    """

    edge_index: Tensor
    values: Tensor
    num_nodes: int

    def __post_init__(self):
        ei, val = self.edge_index, self.values
        if not isinstance(ei, Tensor) or ei.dim() != 2 or ei.shape[0] != 2:
            raise ValueError(f"EdgeBias: `edge_index` must have shape (2, E), got "
                             f"{tuple(ei.shape) if isinstance(ei, Tensor) else type(ei).__name__}")
        if not isinstance(val, Tensor) or val.dim() not in (1, 2) or val.shape[0] != ei.shape[1]:
            raise ValueError(f"EdgeBias: `values` must have shape (E,) or (E, H) with E={ei.shape[1]}, got "
                             f"{tuple(val.shape) if isinstance(val, Tensor) else type(val).__name__}")

    @property
    def num_heads(self) -> int | None:
        return self.values.shape[1] if self.values.dim() == 2 else None

    def materialize(self, lq, lk, device=None, dtype=None):
        val = self.values if self.values.dim() == 2 else self.values.unsqueeze(1)  # (E, H or 1)
        dense = torch.zeros(lq, lk, val.shape[1], device=val.device, dtype=val.dtype)  # (Lq, Lk, H)
        dense = dense.index_put((self.edge_index[1], self.edge_index[0]), val, accumulate=True)
        dense = dense.permute(2, 0, 1)  # (H or 1, Lq, Lk): row = target, column = source
        return dense.to(device=device, dtype=dtype)

    def block(self, q_start, q_end, k_start, k_end, lq, lk, device=None, dtype=None):
        return self.materialize(lq, lk, device, dtype)[:, q_start:q_end, k_start:k_end]


def as_bias(bias: Bias | Tensor | None) -> Bias | None:
    """Accept a Bias, a float tensor (wrapped in ``TensorBias``) or None."""
    if bias is None or isinstance(bias, Bias):
        return bias
    if isinstance(bias, Tensor):
        return TensorBias(bias)
    raise TypeError(f"attention: `bias` must be a float tensor or an attnkit Bias, got {type(bias).__name__}")


def materialize_bias(bias: Bias | Tensor | None, lq: int, lk: int, device=None, dtype=None,
                     ndim: int | None = None) -> Tensor | None:
    """Plain tensors pass through; structured biases become (H or 1, Lq, Lk) tensors, with leading
    singleton dims dropped to at most ``ndim`` dims (so (L, d) inputs keep 2-D outputs)."""
    if bias is None or isinstance(bias, Tensor):
        return bias if bias is None or device is None else bias.to(device)  # a CPU bias for inputs elsewhere
    t = bias.materialize(lq, lk, device, dtype)
    while ndim is not None and t.dim() > ndim and t.shape[0] == 1:
        t = t[0]
    return t
