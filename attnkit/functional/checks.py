"""The checks every attention call passes before any kernel runs: ``check_inputs`` (shapes, dtypes, devices, the
mask's and the bias's fit). ``attention()`` runs them once per call, and ``dispatch.why_backend`` before it
explains a call's choice, so both import them from here."""

from __future__ import annotations

import dataclasses

from torch import Tensor

from .bias import Bias
from .masks import Mask, check_device

__all__ = ["check_inputs"]


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _check_bias(bias, q: Tensor, k: Tensor) -> None:
    lq, lk, lead = q.shape[-2], k.shape[-2], q.shape[:-2]
    if isinstance(bias, Bias):
        for f in dataclasses.fields(bias):
            value = getattr(bias, f.name)
            if isinstance(value, Tensor):
                check_device(value, f"attention: `bias` {type(bias).__name__}.{f.name}", q.device)
        bias.validate(q, k)
        return
    if not isinstance(bias, Tensor) or not bias.dtype.is_floating_point:
        raise ValueError("attention: `bias` must be a floating tensor broadcastable to (..., Lq, Lk) or an "
                         "attnkit Bias")
    check_device(bias, "attention: `bias`", q.device)
    shape = _shape(bias)
    rest, tail = shape[:-2], shape[-2:]
    fits = (0 < len(shape) <= q.dim() and tail[-1] in (1, lk) and (len(tail) < 2 or tail[0] in (1, lq))
            and all(b in (1, n) for b, n in zip(reversed(rest), reversed(lead))))
    if not fits:
        raise ValueError(f"attention: `bias` shape {shape} does not broadcast to (*{tuple(lead)}, Lq={lq}, Lk={lk})")


def check_inputs(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias: Tensor | Bias | None) -> None:
    """Raise ValueError naming the argument and the shapes, before any computation: everything a kernel
    assumes (shapes, dtypes, one device for q, k, v and the mask's and bias's tensors there or on the CPU)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"attention: `{name}` must be a tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"attention: `{name}` must have shape (..., L, d), got {_shape(t)}")
        if not t.dtype.is_floating_point:
            raise ValueError(f"attention: `{name}` must be a floating tensor, got {t.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"attention: q, k, v must be on one device, got q {q.device}, k {k.device}, v {v.device}")
    if not (q.dim() == k.dim() == v.dim()):
        raise ValueError(f"attention: q, k, v must have the same number of dims, got "
                         f"q {_shape(q)}, k {_shape(k)}, v {_shape(v)}")
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        raise ValueError(f"attention: batch dims of q, k, v differ: q {_shape(q)}, k {_shape(k)}, v {_shape(v)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: q and k must share the feature size d, got q {_shape(q)}, k {_shape(k)}")
    if q.shape[-1] == 0:
        raise ValueError(f"attention: q and k need a feature size d >= 1, got q {_shape(q)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: k and v must have the same length Lk, got k {_shape(k)}, v {_shape(v)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"attention: q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if mask is not None:
        mask.validate(q.shape[-2], k.shape[-2], tuple(q.shape[:-2]), q.device)
    if bias is not None:
        _check_bias(bias, q, k)
