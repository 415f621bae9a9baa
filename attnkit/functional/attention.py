"""``attention()``: the one entry point. Validates once, picks a backend, calls it."""

from __future__ import annotations

import math
from typing import NamedTuple

from torch import Tensor

from .backends import Call, get_backend
from .bias import Bias
from .checks import check_inputs
from .dispatch import choose
from .masks import Mask, as_mask
from .scores import NORMALIZERS, additive_scores, dot_scores

__all__ = ["attention", "step_kernel", "explain", "Intermediates", "check_inputs"]


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | Tensor | None = None, *,
              bias: Tensor | Bias | None = None, scale: float | None = None, dropout_p: float = 0.0,
              return_weights: bool = False, backend: str | None = None):
    """Scaled dot-product attention: softmax(q k^T * scale + bias, masked) v.

    Args:
        q: (..., Lq, d) queries.  k: (..., Lk, d) keys.  v: (..., Lk, dv) values. One dtype, one device.
        mask: an attnkit mask (``attnkit.masks``) or a bool tensor broadcastable (right-aligned)
            to (..., Lq, Lk); True = may attend.
        bias: optional float tensor broadcastable to (..., Lq, Lk), or a structured
            ``attnkit.functional.bias.Bias`` (ALiBi, relative), added to the scaled scores.
        scale: defaults to 1/sqrt(d).
        dropout_p: dropout on the attention weights (pass 0.0 at evaluation).
        return_weights: also return the weights (..., Lq, Lk).
        backend: a registered backend name (``attnkit.functional.available_backends()``): it runs its own
            algorithm or raises a ValueError saying why it cannot take the call. None: the automatic choice,
            the ordered table of ``attnkit.functional.dispatch`` (``why_backend`` explains a call's row).

    Returns:
        out (..., Lq, dv), or (out, weights) when ``return_weights``.

    NaN / inf (every backend; ``attnkit.functional.policy`` has the helpers):
        1. A masked-out (query, key) pair never influences that query's output: neither its score nor its
           value enters, whatever they hold (NaN, +-inf).
        2. Over the keys a query may attend to, the output is softmax(scores) @ values in IEEE arithmetic,
           as torch's SDPA computes it: a NaN or +inf score makes that query's row NaN, a -inf score is a
           weight of 0, a NaN / inf value reaches the output columns it is multiplied into.
        3. A query with nothing to attend to (no key, or only -inf scores, as SDPA's kernel has it)
           outputs zeros (and gets zero gradients).
        4. float16 scores are computed and normalised in float32, so the grad mode (which changes the
           automatic backend) never turns a number into NaN.
    Inputs are validated before any kernel runs (ValueError naming the argument); empty sizes (batch,
    Lq or Lk of 0) work on every backend.
    """
    mask = as_mask(mask)
    check_inputs(q, k, v, mask, bias)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"attention: `dropout_p` must be in [0, 1), got {dropout_p}")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"attention: `scale` must be a finite number, got {scale}")
    call = Call.of(q, k, v, mask, bias, dropout_p, return_weights)
    if backend is None:
        chosen = choose(call)
    else:
        chosen = get_backend(backend)
        reason = chosen.why_not(call)
        if reason is not None:
            raise ValueError(f"attention: {reason}")
    out, weights = chosen.fn(q, k, v, mask, bias, scale, dropout_p, return_weights)
    return (out, weights) if return_weights else out


def step_kernel(backend: str, q: Tensor, k: Tensor, v: Tensor, mask: Mask | Tensor | None = None):
    """The one other door, for a loop that calls one backend thousands of times with inputs like these (a
    decoder's steps, where ``attention``'s checks would cost more than the kernel): the checks of
    ``attention(q, k, v, mask, backend=backend)`` and the backend's own conditions run here, once, on example
    inputs, and the backend's raw kernel is returned (its signature: the backend's ``step`` doc). Later calls
    skip the Python checks; the caller keeps the dtype, device, head sizes and mask kind of the example (the
    native kernel still checks shapes, dtypes and devices, and raises rather than crash). Raises ValueError
    where the backend cannot take the example, or has no raw kernel.
    """
    mask = as_mask(mask)
    check_inputs(q, k, v, mask, None)
    chosen = get_backend(backend)
    if chosen.step is None:
        raise ValueError(f"attention: backend {backend!r} has no step kernel")
    reason = chosen.why_not(Call.of(q, k, v, mask))
    if reason is not None:
        raise ValueError(f"attention: {reason}")
    return chosen.step()


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


