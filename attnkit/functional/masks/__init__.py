"""Attention masks (True = may attend): the kinds (``kinds``), the sparse patterns of the efficient
Transformers (``patterns``) and the readers kernels use (``readers``)."""

from .kinds import *  # noqa: F403
from .kinds import __all__ as _kinds
from .patterns import GlobalTokens, Strided, global_tokens, strided
from .readers import full_parts, graph_of, lengths_per_row, window_parts

__all__ = [*_kinds, "GlobalTokens", "Strided", "global_tokens", "strided",
           "window_parts", "full_parts", "graph_of", "lengths_per_row"]
