"""``attention()``: the one entry point. Validates once, picks a backend, calls it."""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor

from .backends import REGISTRY, get_backend
from .bias import Bias
from .masks import Mask, as_mask
from .scores import NORMALIZERS, additive_scores, dot_scores

__all__ = ["attention", "explain", "select_backend", "Intermediates", "check_inputs"]


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def check_inputs(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | Bias | None) -> None:
    """Raise ValueError naming the argument and the shapes, before any computation."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"attention: `{name}` must be a tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"attention: `{name}` must have shape (..., L, d), got {_shape(t)}")
        if not t.dtype.is_floating_point:
            raise ValueError(f"attention: `{name}` must be a floating tensor, got {t.dtype}")
    if not (q.dim() == k.dim() == v.dim()):
        raise ValueError(f"attention: q, k, v must have the same number of dims, got "
                         f"q {_shape(q)}, k {_shape(k)}, v {_shape(v)}")
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        raise ValueError(f"attention: batch dims of q, k, v differ: q {_shape(q)}, k {_shape(k)}, v {_shape(v)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: q and k must share the feature size d, got q {_shape(q)}, k {_shape(k)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: k and v must have the same length Lk, got k {_shape(k)}, v {_shape(v)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"attention: q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    lq, lk = q.shape[-2], k.shape[-2]
    if mask is not None:
        mask.validate(lq, lk, q.shape[0] if q.dim() > 2 else None)
    if isinstance(bias, Bias):
        bias.validate(q, k)
    elif bias is not None:
        if not isinstance(bias, Tensor) or not bias.dtype.is_floating_point:
            raise ValueError("attention: `bias` must be a floating tensor broadcastable to (..., Lq, Lk)")
        if bias.shape[-1] not in (1, lk) or (bias.dim() > 1 and bias.shape[-2] not in (1, lq)):
            raise ValueError(f"attention: `bias` shape {_shape(bias)} does not fit Lq={lq}, Lk={lk}")


def select_backend(q: Tensor, k: Tensor, mask: Mask | None, bias: Tensor | None, need_weights: bool) -> str:
    """The automatic choice: the highest-priority backend whose ``auto`` predicate accepts the call."""
    for b in sorted(REGISTRY.values(), key=lambda b: -b.priority):
        if b.auto is not None and (b.supports_weights or not need_weights) and b.auto(q, k, mask, bias, need_weights):
            return b.name
    return "math" if need_weights else "sdpa"


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | Tensor | None = None, *,
              bias: Tensor | Bias | None = None, scale: float | None = None, dropout_p: float = 0.0,
              return_weights: bool = False, backend: str | None = None):
    """Scaled dot-product attention: softmax(q k^T * scale + bias, masked) v.

    Args:
        q: (..., Lq, d) queries.  k: (..., Lk, d) keys.  v: (..., Lk, dv) values.
        mask: an attnkit mask (``attnkit.masks``) or a bool tensor broadcastable (right-aligned)
            to (..., Lq, Lk); True = may attend. Queries with no allowed key output zeros.
        bias: optional float tensor broadcastable to (..., Lq, Lk), or a structured
            ``attnkit.functional.bias.Bias`` (ALiBi, relative), added to the scaled scores.
        scale: defaults to 1/sqrt(d).
        dropout_p: dropout on the attention weights (pass 0.0 at evaluation).
        return_weights: also return the weights (..., Lq, Lk).
        backend: a registered backend name (``attnkit.functional.available_backends()``);
            None picks one from the mask's structure.

    Returns:
        out (..., Lq, dv), or (out, weights) when ``return_weights``.
    """
    mask = as_mask(mask)
    check_inputs(q, k, v, mask, bias)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"attention: `dropout_p` must be in [0, 1), got {dropout_p}")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    name = backend or select_backend(q, k, mask, bias, return_weights)
    chosen = get_backend(name)
    if return_weights and not chosen.supports_weights:
        raise ValueError(f"attention: backend {name!r} cannot return weights; use backend='math' or None")
    out, weights = chosen.fn(q, k, v, mask, bias, scale, dropout_p, return_weights)
    return (out, weights) if return_weights else out


class Intermediates(NamedTuple):
    """The lecture's matrices, batch-first (one *row* per query; the lecture's A is ``scores.mT``).

    q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv), scores A (..., Lq, Lk), weights A' (..., Lq, Lk),
    out O (..., Lq, dv).
    """

    q: Tensor
    k: Tensor
    v: Tensor
    scores: Tensor
    weights: Tensor
    out: Tensor


def explain(q: Tensor, k: Tensor, v: Tensor, mask: Mask | Tensor | None = None, *,
            score: str = "scaled_dot", normalize: str = "softmax", scale: float | None = None,
            additive: tuple[Tensor, Tensor, Tensor] | None = None) -> Intermediates:
    """Attention with every intermediate returned, for teaching and plots.

    ``score``: "dot", "scaled_dot" or "additive" (then ``additive=(W_q, W_k, w_v)``).
    ``normalize``: "softmax", "relu" or "sigmoid".
    """
    mask = as_mask(mask)
    check_inputs(q, k, v, mask, None)
    if score == "dot":
        a = dot_scores(q, k)
    elif score == "scaled_dot":
        a = dot_scores(q, k) * (q.shape[-1] ** -0.5 if scale is None else scale)
    elif score == "additive":
        if additive is None:
            raise ValueError("explain: score='additive' needs `additive=(W_q, W_k, w_v)`")
        a = additive_scores(q, k, *additive)
    else:
        raise ValueError(f"explain: `score` must be 'dot', 'scaled_dot' or 'additive', got {score!r}")
    if normalize not in NORMALIZERS:
        raise ValueError(f"explain: `normalize` must be one of {sorted(NORMALIZERS)}, got {normalize!r}")
    dense = None if mask is None else mask.materialize(q.shape[-2], k.shape[-2], q.dim(), q.device)
    weights = NORMALIZERS[normalize](a, dense)
    return Intermediates(q, k, v, a, weights, weights @ v)


