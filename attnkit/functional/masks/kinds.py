"""The mask kinds. One convention everywhere: ``True`` = this query may attend to this key.

Masks are small structured objects (``Causal``, ``Window``, ``Padding``, ``Graph``, ``Dense``)
that combine with ``&`` and ``|``. They stay structured until a backend asks for
``materialize()``; fast backends read the structure (window sizes, edge lists) instead.

Index conventions for a query position ``i`` (0..Lq-1) and key position ``j`` (0..Lk-1):
queries are aligned to the *end* of the keys, ``i' = i + (Lk - Lq)``, so a query block that
continues a K/V cache keeps seeing the right keys.

- ``causal()``:            j <= i'
- ``window(left, right)``: i' - left <= j <= i' + right   (the lecture's truncated attention)
- ``padding(lengths)``:    j < lengths[b]                  (per batch row; keys past the length hidden)
- ``graph(edge_index, n)``: query node ``t`` sees key node ``s`` iff (s, t) is a column of edge_index
- ``segments(lengths)``:   i and j lie in the same segment (sequences packed end to end, no padding)
- ``global_tokens(g)``:    i' or j is one of the global positions (Longformer / BigBird's global tokens;
                           ``window(w, w) | global_tokens(2)`` is Longformer's pattern)
- ``strided(s)``:          (i' - j) is a multiple of s (Sparse Transformer's strided head;
                           ``window(s, s) | strided(s)`` its merged pattern, ``& causal()`` the causal one)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "Mask", "Dense", "Causal", "Window", "Padding", "Graph", "Segments", "And", "Or",
    "causal", "window", "padding", "graph", "segments", "as_mask", "conjuncts", "for_heads", "check_edge_index",
    "keep_positions", "check_device", "disjuncts",
]


class Mask:
    """Base class. Subclasses implement ``materialize``."""

    def materialize(self, lq: int, lk: int, ndim: int, device: torch.device | None = None) -> Tensor:
        """Return a bool tensor with ``ndim`` dims whose last two are (Lq or 1, Lk or 1).

        Leading dims are 1 (broadcast) except for masks that carry a batch dim (``Padding``),
        which put it first: ``(B, 1, ..., 1, Lk)``.
        """
        raise NotImplementedError

    def validate(self, lq: int, lk: int, lead: tuple[int, ...], device: torch.device) -> None:
        """Raise ValueError if this mask cannot apply to inputs (*lead, Lq | Lk, d) on ``device``:
        sizes, broadcasting, and where its tensors live (``device`` or the CPU)."""

    def __and__(self, other: Mask | Tensor) -> Mask:
        return And(self, as_mask(other))

    def __rand__(self, other: Tensor) -> Mask:
        return And(as_mask(other), self)

    def __or__(self, other: Mask | Tensor) -> Mask:
        return Or(self, as_mask(other))

    def __ror__(self, other: Tensor) -> Mask:
        return Or(as_mask(other), self)


def check_edge_index(edge_index: Tensor, num_nodes: int, name: str = "edge_index") -> None:
    """ValueError naming ``name`` unless it is a (2, E) int32/int64 tensor of ids in [0, num_nodes)."""
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2:
        got = tuple(edge_index.shape) if isinstance(edge_index, Tensor) else type(edge_index).__name__
        raise ValueError(f"graph: `{name}` must have shape (2, E), got {got}")
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"graph: `{name}` must be int64 or int32, got {edge_index.dtype}")
    if edge_index.numel() and _has_data(edge_index) and (int(edge_index.min()) < 0
                                                          or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"graph: `{name}` has node ids in [{int(edge_index.min())}, {int(edge_index.max())}], "
                         f"outside [0, num_nodes={num_nodes})")


def check_device(t: Tensor, who: str, device: torch.device) -> None:
    """A mask's or bias's tensor must live on the inputs' ``device`` or on the CPU (it is then moved)."""
    if t.device != device and t.device.type != "cpu":
        raise ValueError(f"{who} is on {t.device} but q, k, v are on {device}; put it on {device} or the CPU")


def _has_data(t: Tensor) -> bool:
    return t.device.type != "meta"


def keep_positions(lengths: Tensor, length: int) -> Tensor:
    """(B,) lengths -> (B, length) bool, True at positions j < lengths[b] (the real tokens)."""
    return torch.arange(length, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)


def _check_lengths(t, who: str, shape: str) -> None:
    """``t`` must be a 1-D integer tensor of non-negative lengths."""
    if not isinstance(t, Tensor) or t.dim() != 1 or t.dtype.is_floating_point or t.dtype == torch.bool:
        desc = f"{t.dtype} tensor of shape {tuple(t.shape)}" if isinstance(t, Tensor) else type(t).__name__
        raise ValueError(f"{who}: `lengths` must be a 1-D integer tensor {shape}, got {desc}")
    if t.numel() and _has_data(t) and int(t.min()) < 0:
        raise ValueError(f"{who}: `lengths` must be >= 0, got min {int(t.min())}")


def _as_lengths(lengths: Tensor | list[int]) -> Tensor:
    return lengths if isinstance(lengths, Tensor) else torch.as_tensor(lengths, dtype=torch.long)


def _pad_dims(t: Tensor, ndim: int) -> Tensor:
    """Prepend singleton dims so ``t`` has ``ndim`` dims (right-aligned broadcasting)."""
    while t.dim() < ndim:
        t = t.unsqueeze(0)
    return t


def _offsets(lq: int, lk: int, device) -> tuple[Tensor, Tensor]:
    """Return (i', j) as (Lq, 1) and (1, Lk) integer grids, queries aligned to the end."""
    i = torch.arange(lq, device=device).unsqueeze(1) + (lk - lq)  # (Lq, 1)
    j = torch.arange(lk, device=device).unsqueeze(0)  # (1, Lk)
    return i, j


@dataclass(frozen=True, eq=False)
class Dense(Mask):
    """Any bool tensor broadcastable (right-aligned) to (..., Lq, Lk)."""

    tensor: Tensor

    def __post_init__(self):
        if not isinstance(self.tensor, Tensor):
            raise TypeError(f"mask: expected a bool tensor, got {type(self.tensor).__name__}")
        if self.tensor.dtype != torch.bool:
            raise ValueError(
                f"mask: expected dtype torch.bool (True = may attend), got {self.tensor.dtype} "
                f"with shape {tuple(self.tensor.shape)}; convert with `mask.bool()` or build one "
                "with attnkit.masks")
        if self.tensor.dim() < 2:
            raise ValueError(f"mask: expected at least 2 dims (..., Lq, Lk), got shape {tuple(self.tensor.shape)}")

    def validate(self, lq, lk, lead, device):
        check_device(self.tensor, "mask", device)
        *rest, mq, mk = self.tensor.shape
        if mq not in (1, lq) or mk not in (1, lk):
            raise ValueError(
                f"mask: shape {tuple(self.tensor.shape)} does not fit Lq={lq}, Lk={lk}; "
                f"its last two dims must be (Lq or 1, Lk or 1)")
        if len(rest) > len(lead) or any(m not in (1, n) for m, n in zip(reversed(rest), reversed(lead))):
            raise ValueError(f"mask: shape {tuple(self.tensor.shape)} does not broadcast to the inputs' "
                             f"(*{tuple(lead)}, Lq={lq}, Lk={lk})")

    def materialize(self, lq, lk, ndim, device=None):
        if self.tensor.dim() > ndim:
            raise ValueError(f"mask: shape {tuple(self.tensor.shape)} has more dims than the inputs ({ndim})")
        return _pad_dims(self.tensor.to(device) if device is not None else self.tensor, ndim)


@dataclass(frozen=True)
class Causal(Mask):
    """Query i' sees keys j <= i' (queries aligned to the end of the keys)."""

    def materialize(self, lq, lk, ndim, device=None):
        i, j = _offsets(lq, lk, device)
        return _pad_dims(j <= i, ndim)


@dataclass(frozen=True)
class Window(Mask):
    """Truncated self-attention: query i' sees keys i' - left <= j <= i' + right."""

    left: int
    right: int

    def __post_init__(self):
        for name in ("left", "right"):
            val = getattr(self, name)
            if not isinstance(val, int) or isinstance(val, bool) or val < 0:
                raise ValueError(f"window: `{name}` must be an integer >= 0, got {val!r}")

    def materialize(self, lq, lk, ndim, device=None):
        i, j = _offsets(lq, lk, device)
        return _pad_dims((j >= i - self.left) & (j <= i + self.right), ndim)


@dataclass(frozen=True, eq=False)
class Padding(Mask):
    """Per batch row b, keys j >= lengths[b] are hidden. ``lengths``: (B,) integer tensor."""

    lengths: Tensor

    def __post_init__(self):
        _check_lengths(self.lengths, "padding", "(B,)")

    def validate(self, lq, lk, lead, device):
        check_device(self.lengths, "padding: `lengths`", device)
        batch = lead[0] if lead else 1
        if self.lengths.shape[0] != batch:
            raise ValueError(f"padding: `lengths` has {self.lengths.shape[0]} rows but the batch has {batch}")
        if self.lengths.numel() and _has_data(self.lengths) and int(self.lengths.max()) > lk:
            raise ValueError(f"padding: a length {int(self.lengths.max())} exceeds the key length Lk={lk}")

    def materialize(self, lq, lk, ndim, device=None):
        lengths = self.lengths.to(device) if device is not None else self.lengths
        keep = keep_positions(lengths, lk)  # (B, Lk)
        keep = keep.view(keep.shape[0], *([1] * (ndim - 2)), lk)  # (B, 1, ..., 1, Lk)
        return keep


@dataclass(frozen=True, eq=False)
class Graph(Mask):
    """Attention only along edges. ``edge_index``: (2, E) integer tensor of (source, target) pairs;
    query node ``target`` attends to key node ``source``. Lq = Lk = ``num_nodes``."""

    edge_index: Tensor
    num_nodes: int

    def __post_init__(self):
        n = self.num_nodes
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"graph: `num_nodes` must be an integer >= 0, got {n!r}")
        check_edge_index(self.edge_index, n)

    def validate(self, lq, lk, lead, device):
        check_device(self.edge_index, "graph: `edge_index`", device)
        if lq != self.num_nodes or lk != self.num_nodes:
            raise ValueError(f"graph: num_nodes={self.num_nodes} but Lq={lq}, Lk={lk}")

    def materialize(self, lq, lk, ndim, device=None):
        adj = torch.zeros(self.num_nodes, self.num_nodes, dtype=torch.bool, device=device)
        ei = self.edge_index.to(device) if device is not None else self.edge_index
        adj[ei[1], ei[0]] = True  # row = query (target), column = key (source)
        return _pad_dims(adj, ndim)


@dataclass(frozen=True, eq=False)
class Segments(Mask):
    """Sequences packed end to end along the length axis (no padding): position i may attend to
    position j iff both lie in the same segment. ``lengths``: (S,) segment lengths, summing to
    Lq = Lk. The same for every batch row (usually B = 1)."""

    lengths: Tensor

    def __post_init__(self):
        _check_lengths(self.lengths, "segments", "(S,)")

    @property
    def total(self) -> int:
        return int(self.lengths.sum())

    @property
    def longest(self) -> int:
        return int(self.lengths.max()) if self.lengths.numel() else 0

    def offsets(self) -> Tensor:
        """(S + 1,) int64: segment s covers positions offsets[s] .. offsets[s + 1] - 1."""
        return torch.cat((self.lengths.new_zeros(1), self.lengths.cumsum(0))).to(torch.int64)

    def ids(self, device=None) -> Tensor:
        """(L,) the segment of each position."""
        n = self.lengths.to(device) if device is not None else self.lengths
        return torch.repeat_interleave(torch.arange(n.numel(), device=n.device), n)

    def validate(self, lq, lk, lead, device):
        check_device(self.lengths, "segments: `lengths`", device)
        if not _has_data(self.lengths):
            raise ValueError("segments: `lengths` is on the meta device, but its values decide the mask")
        if lq != self.total or lk != self.total:
            raise ValueError(f"segments: the lengths sum to {self.total} but Lq={lq}, Lk={lk}")

    def materialize(self, lq, lk, ndim, device=None):
        ids = self.ids(device)
        return _pad_dims(ids[:, None] == ids[None, :], ndim)  # (L, L) block diagonal


@dataclass(frozen=True, eq=False)
class _Pair(Mask):
    """Two masks combined; valid where both are."""

    a: Mask
    b: Mask

    def validate(self, lq, lk, lead, device):
        self.a.validate(lq, lk, lead, device)
        self.b.validate(lq, lk, lead, device)


class And(_Pair):
    """Both masks allow the pair."""

    def materialize(self, lq, lk, ndim, device=None):
        return self.a.materialize(lq, lk, ndim, device) & self.b.materialize(lq, lk, ndim, device)


class Or(_Pair):
    """Either mask allows the pair."""

    def materialize(self, lq, lk, ndim, device=None):
        return self.a.materialize(lq, lk, ndim, device) | self.b.materialize(lq, lk, ndim, device)


def conjuncts(mask: Mask | None) -> list[Mask]:
    """Flatten a tree of ``&`` into its parts (an ``Or`` stays one part)."""
    if mask is None:
        return []
    if isinstance(mask, And):
        return conjuncts(mask.a) + conjuncts(mask.b)
    return [mask]


def disjuncts(mask: Mask | None) -> list[Mask]:
    """Flatten a tree of ``|`` into its parts (an ``And`` stays one part)."""
    if mask is None:
        return []
    if isinstance(mask, Or):
        return disjuncts(mask.a) + disjuncts(mask.b)
    return [mask]


def as_mask(mask: Mask | Tensor | None) -> Mask | None:
    """Accept a Mask, a bool tensor or None."""
    if mask is None or isinstance(mask, Mask):
        return mask
    if isinstance(mask, Tensor):
        return Dense(mask)
    raise TypeError(f"mask: expected an attnkit mask, a bool tensor or None, got {type(mask).__name__}")


def causal() -> Causal:
    """Each query sees itself and earlier keys (aligned to the end of the keys)."""
    return Causal()


def window(left: int, right: int) -> Window:
    """Truncated self-attention: query i sees keys i-left .. i+right."""
    return Window(left, right)


def padding(lengths: Tensor | list[int]) -> Padding:
    """Hide keys at or past each row's length. ``lengths``: (B,) integers."""
    return Padding(_as_lengths(lengths))


def segments(lengths: Tensor | list[int]) -> Segments:
    """Packed sequences: attend only within one's own segment. ``lengths``: (S,) integers."""
    return Segments(_as_lengths(lengths))


def graph(edge_index: Tensor, num_nodes: int) -> Graph:
    """Attend only along edges: node ``edge_index[1, e]`` attends to node ``edge_index[0, e]``."""
    return Graph(edge_index, num_nodes)


def for_heads(mask: Mask | Tensor | None) -> Mask | None:
    """Batch-first module masks -> masks for (B, H, Lq, Lk) scores.

    A bool tensor of shape (B, Lq, Lk) gets a head dim, (B, 1, Lq, Lk); (Lq, Lk) broadcasts as is.
    Structured masks already know where their batch dim goes.
    """
    mask = as_mask(mask)
    if isinstance(mask, Dense) and mask.tensor.dim() == 3:
        return Dense(mask.tensor.unsqueeze(1))
    if isinstance(mask, And):
        return And(for_heads(mask.a), for_heads(mask.b))
    if isinstance(mask, Or):
        return Or(for_heads(mask.a), for_heads(mask.b))
    return mask
