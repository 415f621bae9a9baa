"""Readers of a mask's structure, for the kernels that never build an (Lq, Lk) tensor.

Each returns the few numbers a kernel needs, or None when the mask is not of that form:

- ``window_parts``: ``window [& causal] [& padding]`` -> (left, right, key lengths)
- ``full_parts``: no mask, ``padding`` or one ``segments`` -> (key lengths, the ``Segments``)
- ``graph_of``: a lone ``graph`` mask -> the ``Graph``
- ``lengths_per_row``: padding lengths (B,) -> one per row of a kernel's flattened batch
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .kinds import Causal, Graph, Mask, Padding, Segments, Window, conjuncts

__all__ = ["window_parts", "full_parts", "graph_of", "lengths_per_row"]


def window_parts(mask: Mask | None, require_window: bool = True) -> tuple[int | None, int | None, Tensor | None] | None:
    """Read (left, right, lengths) from ``window [& causal] [& padding]``; None if not that form.

    Keys ``i' - left .. i' + right`` of query i (aligned to the end of the keys), the first ``lengths[b]``
    of batch row b. With ``require_window=False`` the window may be absent: then left / right are None
    ("every key"), right 0 if causal. Several windows or paddings combine to the narrowest.
    """
    left = right = None
    lengths = None
    causal = False
    for part in conjuncts(mask):
        if isinstance(part, Window):
            left = part.left if left is None else min(left, part.left)
            right = part.right if right is None else min(right, part.right)
        elif isinstance(part, Causal):
            causal = True
        elif isinstance(part, Padding):
            lengths = part.lengths if lengths is None else torch.minimum(lengths, part.lengths)
        else:
            return None
    if left is None and require_window:
        return None
    return left, (0 if causal else right), lengths


def full_parts(mask: Mask | None) -> tuple[Tensor | None, Segments | None] | None:
    """(key lengths, the ``Segments`` mask) for no mask, a padding mask or one ``segments`` mask (full
    attention within each sequence); None for any other mask."""
    if isinstance(mask, Segments):
        return None, mask
    parts = window_parts(mask, require_window=False)
    if parts is None or parts[0] is not None or parts[1] is not None:  # a window or a causal part
        return None
    return parts[2], None


def graph_of(mask: Mask | None) -> Graph | None:
    """The ``Graph`` when the mask is a graph mask on its own."""
    parts = conjuncts(mask)
    return parts[0] if len(parts) == 1 and isinstance(parts[0], Graph) else None


def lengths_per_row(lengths: Tensor | None, lead: tuple[int, ...], keep: int = 0) -> Tensor | None:
    """Padding lengths (B,) for inputs (*lead, L, d) -> one per row of the flattened batch.

    ``keep=0``: rows of (prod(lead), L, d); ``keep=1``: rows of (prod(lead[:-1]), lead[-1], L, d), the
    last leading dim (heads) kept apart. 2-D inputs (no leading dim) are one row.
    """
    if lengths is None:
        return None
    if not lead:
        return lengths.reshape(-1)
    per = math.prod(lead[1:len(lead) - keep]) if len(lead) > keep else 1
    return lengths.repeat_interleave(per) if per != 1 else lengths.reshape(-1)
