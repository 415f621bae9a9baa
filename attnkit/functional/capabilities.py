"""What each backend can take, as a public query: for callers that must know before they call (the
pretrained encoder packs its batches only where the ``short`` kernel runs) and for the docs."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from . import native
from .backends import REGISTRY, Call, get_backend
from .dispatch import RULES

__all__ = ["Capabilities", "capabilities", "why_not"]


class Capabilities(NamedTuple):
    name: str
    summary: str
    exact: bool  # softmax attention (up to rounding); False: an approximation, never automatic
    weights: bool  # can return the attention weights
    grad: bool  # has a backward
    dropout: bool
    bias: bool
    masks: str  # the masks it takes, in words
    dtypes: tuple[torch.dtype, ...] | None  # the dtypes it runs on this machine (None: every float dtype)
    devices: tuple[str, ...] | None  # device types (None: any)
    available: str | None  # None when it runs here, else why not (e.g. no native kernel)
    automatic: bool  # has a row in the dispatch table


def capabilities() -> dict[str, Capabilities]:
    """Every registered backend's capabilities on this machine, by name."""
    automatic = {r.backend for r in RULES}
    out = {}
    for name, b in sorted(REGISTRY.items()):
        problem = native.unavailable() if b.native else None
        out[name] = Capabilities(name, b.summary, b.exact, b.weights, b.grad, b.dropout, b.bias, b.masks,
                                 () if problem else b.dtypes_here(), b.devices, problem, name in automatic)
    return out


def why_not(backend: str, q: Tensor, k: Tensor, v: Tensor, mask=None, *, bias=None, dropout_p: float = 0.0,
            return_weights: bool = False) -> str | None:
    """Why ``attention(q, k, v, mask, bias=bias, dropout_p=dropout_p, return_weights=return_weights,
    backend=backend)`` would raise a ValueError, or None when it runs (in the current grad mode).
    Only shapes, dtypes and devices are read: q, k, v may be empty tensors of the right shapes."""
    from .attention import check_inputs
    from .masks import as_mask

    mask = as_mask(mask)
    try:
        check_inputs(q, k, v, mask, bias)
    except ValueError as e:
        return str(e)
    return get_backend(backend).why_not(Call.of(q, k, v, mask, bias, dropout_p, return_weights))
