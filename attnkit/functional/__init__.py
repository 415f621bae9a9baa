"""Layer 1: pure functions (kernels, masks, scores, positional tables). No parameters, no state."""

from . import masks, pooling, positional, scores
from .attention import Intermediates, attention, check_inputs, explain
from .backends import Backend, available_backends, get_backend, register_backend
from .capabilities import Capabilities, capabilities, why_not
from .dispatch import Choice, select_backend, why_backend

__all__ = [
    "attention", "explain", "Intermediates", "check_inputs",
    "select_backend", "why_backend", "Choice", "capabilities", "Capabilities", "why_not",
    "Backend", "register_backend", "get_backend", "available_backends",
    "masks", "scores", "positional", "pooling",
]
