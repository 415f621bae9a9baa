"""Layer 1: pure functions (kernels, masks, scores, positional tables). No parameters, no state."""

from . import masks, pooling, positional, scores
from .attention import Intermediates, attention, check_inputs, explain, select_backend
from .backends import Backend, available_backends, get_backend, register_backend

__all__ = [
    "attention", "explain", "Intermediates", "select_backend", "check_inputs",
    "Backend", "register_backend", "get_backend", "available_backends",
    "masks", "scores", "positional", "pooling",
]
