"""The backend registry: plain functions with one signature, chosen per call.

Every backend is ``fn(q, k, v, mask, bias, scale, dropout_p, need_weights) -> (out, weights | None)``
with q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv), ``mask`` an attnkit ``Mask`` or None
(True = may attend), ``bias`` a float tensor broadcastable to (..., Lq, Lk) or None.
A query with nothing to attend to gets a zero output.

``auto`` is a predicate ``(q, k, mask, bias, need_weights) -> bool``: when ``attention`` is
called without ``backend=``, the first registered backend (highest ``priority``) whose
predicate holds is used; "sdpa" is the fallback, "math" when weights are requested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

BackendFn = Callable[..., tuple[Tensor, Tensor | None]]


@dataclass(frozen=True)
class Backend:
    name: str
    fn: BackendFn
    supports_weights: bool = False
    exact: bool = True
    priority: int = 0
    auto: Callable[..., bool] | None = None


REGISTRY: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Add (or replace) a backend by name."""
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
from . import tiled as _tiled  # noqa: E402,F401  (registers "tiled", the native CPU kernel)
