"""The sparse patterns of the efficient-Transformer papers, as masks (True = may attend): global tokens
(Longformer, BigBird) and a stride (Sparse Transformer). ``|`` them with ``window`` and run them on the
exact ``sparse`` backend, or on any backend as dense masks."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .kinds import Mask, _offsets, _pad_dims

__all__ = ["GlobalTokens", "Strided", "global_tokens", "strided"]


@dataclass(frozen=True)
class GlobalTokens(Mask):
    """Global positions (sorted, distinct): they attend to every key and every query attends to them.
    Query i' (aligned to the end of the keys) sees key j iff i' or j is global."""

    positions: tuple[int, ...]

    def __post_init__(self):
        pos = self.positions
        if not isinstance(pos, tuple) or any(not isinstance(p, int) or isinstance(p, bool) or p < 0 for p in pos):
            raise ValueError(f"global_tokens: `positions` must be a tuple of integers >= 0, got {pos!r}")
        if list(pos) != sorted(set(pos)):
            raise ValueError(f"global_tokens: `positions` must be sorted and distinct, got {pos!r}")

    def validate(self, lq, lk, lead, device):
        if self.positions and self.positions[-1] >= lk:
            raise ValueError(f"global_tokens: position {self.positions[-1]} is past the key length Lk={lk}")

    def materialize(self, lq, lk, ndim, device=None):
        i, j = _offsets(lq, lk, device)
        g = torch.as_tensor(self.positions, dtype=torch.long, device=device)
        return _pad_dims(torch.isin(i, g) | torch.isin(j, g), ndim)


@dataclass(frozen=True)
class Strided(Mask):
    """Query i' sees key j iff (i' - j) is a multiple of ``stride`` (Child et al. 2019's strided head)."""

    stride: int

    def __post_init__(self):
        if not isinstance(self.stride, int) or isinstance(self.stride, bool) or self.stride < 1:
            raise ValueError(f"strided: `stride` must be an integer >= 1, got {self.stride!r}")

    def materialize(self, lq, lk, ndim, device=None):
        i, j = _offsets(lq, lk, device)
        return _pad_dims((i - j) % self.stride == 0, ndim)


def global_tokens(positions: int | list[int] | tuple[int, ...]) -> GlobalTokens:
    """Global tokens: an integer n = the first n positions (e.g. a class token), or the positions."""
    if isinstance(positions, int) and not isinstance(positions, bool):
        if positions < 0:
            raise ValueError(f"global_tokens: the number of global tokens must be >= 0, got {positions}")
        return GlobalTokens(tuple(range(positions)))
    return GlobalTokens(tuple(sorted(set(positions))) if isinstance(positions, (list, tuple)) else positions)


def strided(stride: int) -> Strided:
    """Keys at multiples of ``stride`` from the query: (i - j) % stride == 0."""
    return Strided(stride)
