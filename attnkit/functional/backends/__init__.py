"""The backend registry: plain functions with one signature, and what each of them can take.

Every backend is ``fn(q, k, v, mask, bias, scale, dropout_p, need_weights) -> (out, weights | None)``
with q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv), ``mask`` an attnkit ``Mask`` or None
(True = may attend), ``bias`` a float tensor broadcastable to (..., Lq, Lk), a structured ``Bias``, or None.
``attention()`` has validated the arguments (shapes, dtypes, devices, masks) before any backend runs,
and every backend follows the NaN / inf policy of ``attnkit.functional.attention``.

A ``Backend`` carries its function and its capabilities: exact or approximate, weights, autograd,
dropout, bias, dtypes, devices, masks. ``why_not(call)`` says why it cannot take a call (None when it
can): a backend named in ``attention(..., backend=...)`` runs its own algorithm or raises a ValueError
with that reason; it never hands the call to another backend. The automatic choice is not here: it is
the one ordered table in ``attnkit.functional.dispatch``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from .. import native

__all__ = ["Backend", "Call", "register_backend", "get_backend", "available_backends", "REGISTRY"]

BackendFn = Callable[..., tuple[Tensor, Tensor | None]]


class Call(NamedTuple):
    """One ``attention`` call, as backends and the dispatch table see it (arguments already validated)."""

    q: Tensor
    k: Tensor
    v: Tensor
    mask: object  # Mask | None
    bias: object  # Tensor | Bias | None
    dropout_p: float
    need_weights: bool
    grad: bool  # autograd will differentiate it: grad mode on and an input requires grad

    @classmethod
    def of(cls, q: Tensor, k: Tensor, v: Tensor, mask=None, bias=None, dropout_p: float = 0.0,
           need_weights: bool = False) -> Call:
        grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                            or (isinstance(bias, Tensor) and bias.requires_grad))
        return cls(q, k, v, mask, bias, float(dropout_p), bool(need_weights), grad)


def _names(items) -> str:
    return ", ".join(str(x).removeprefix("torch.") for x in items)


@dataclass(frozen=True)
class Backend:
    """A backend and what it takes. The generic limits are fields; ``refuse`` adds the backend's own
    (mask structure, sizes, a native kernel that must be built) as ``refuse(call) -> reason | None``."""

    name: str
    fn: BackendFn
    summary: str = ""  # one line: what it computes and how
    exact: bool = True  # softmax attention exactly (up to rounding); False: an approximation
    weights: bool = False  # can return the attention weights
    grad: bool = True  # has a backward
    dropout: bool = True  # takes dropout_p > 0
    bias: bool = True  # takes a `bias`
    dtypes: tuple[torch.dtype, ...] | Callable[[], tuple[torch.dtype, ...]] | None = None  # None: any float
    devices: tuple[str, ...] | None = None  # device types; None: any device with data
    meta: bool = False  # also runs on the meta device (shapes only)
    native: bool = False  # runs attnkit's native kernel (``attnkit.functional.native``), so needs it built
    masks: str = "any"  # the masks it takes, in words
    refuse: Callable[[Call], str | None] | None = None
    step: Callable[[], Callable] | None = None  # -> its raw kernel for repeated calls (``attention.step_kernel``)

    def dtypes_here(self) -> tuple[torch.dtype, ...] | None:
        """The dtypes it takes on this machine (None: every floating dtype)."""
        return self.dtypes() if callable(self.dtypes) else self.dtypes

    def why_not(self, c: Call) -> str | None:
        """Why this backend cannot take the call ``c``, or None when it can."""
        me = f"backend {self.name!r}"
        if c.need_weights and not self.weights:
            return f"{me} cannot return weights; use backend='math' (or leave the choice automatic)"
        device = c.q.device.type
        if device == "meta" and not self.meta:
            return f"{me} needs tensors with data, got the meta device"
        if self.devices is not None and device not in self.devices:
            return f"{me} runs on {_names(self.devices)} tensors only, got {device}"
        if self.native and native.unavailable() is not None:
            return f"{me} needs attnkit's native kernel, unavailable here: {native.unavailable()}"
        dtypes = self.dtypes_here()
        if dtypes is not None and c.q.dtype not in dtypes:
            return f"{me} takes {_names(dtypes)} inputs here, got {_names([c.q.dtype])}"
        if c.grad and not self.grad:
            return f"{me} has no backward (inference only); call it under torch.no_grad() or use another backend"
        if c.dropout_p > 0 and not self.dropout:
            return f"{me} has no dropout; pass dropout_p=0.0 or use another backend"
        if c.bias is not None and not self.bias:
            return f"{me} takes no `bias`"
        return None if self.refuse is None else self.refuse(c)


REGISTRY: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Add (or replace) a backend by name. To have it chosen automatically, add a row to
    ``attnkit.functional.dispatch.RULES``; a registered backend is otherwise only run when named."""
    REGISTRY[backend.name] = backend
    return backend


def get_backend(name: str) -> Backend:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"backend: unknown backend {name!r}; known: {sorted(REGISTRY)}") from None


def available_backends() -> list[str]:
    return sorted(REGISTRY)


from . import chunked as _chunked  # noqa: E402,F401  (registers "chunked")
from . import graph as _graph  # noqa: E402,F401  (registers "graph")
from . import grouped as _grouped  # noqa: E402,F401  (registers "math_grouped")
from . import linear as _linear  # noqa: E402,F401  (registers "linear_approx", approximate, never automatic)
from . import local as _local  # noqa: E402,F401  (registers "local")
from . import math as _math  # noqa: E402,F401  (registers "math")
from . import sdpa as _sdpa  # noqa: E402,F401  (registers "sdpa")
from . import short as _short  # noqa: E402,F401  (registers "short", native, short full attention)
from . import sparse as _sparse  # noqa: E402,F401  (registers "sparse": window / strided / global unions, exact)
from . import tiled as _tiled  # noqa: E402,F401  (registers "tiled", native, window / causal / padding)
