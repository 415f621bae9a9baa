"""Attention masks (True = may attend): the kinds (``kinds``) and the readers kernels use (``readers``)."""

from .kinds import *  # noqa: F403
from .kinds import __all__ as _kinds
from .readers import full_parts, graph_of, lengths_per_row, window_parts

__all__ = [*_kinds, "window_parts", "full_parts", "graph_of", "lengths_per_row"]
