"""Pooling a batch of padded sequences into one vector each, ignoring the padding.

h (B, L, d), lengths (B,) -> (B, d). Positions j >= lengths[b] never contribute.
"""

from __future__ import annotations

from torch import Tensor

from .masks import keep_positions

__all__ = ["masked_sum", "masked_mean", "masked_max"]


def masked_sum(h: Tensor, lengths: Tensor) -> Tensor:
    """Sum over the real positions. Skips the mask when no row is padded."""
    if bool((lengths >= h.shape[1]).all()):
        return h.sum(1)
    return (h * keep_positions(lengths, h.shape[1]).unsqueeze(-1)).sum(1)  # (B, L, 1) mask


def masked_mean(h: Tensor, lengths: Tensor) -> Tensor:
    """Mean over the real positions; a row of length 0 gives zeros."""
    return masked_sum(h, lengths) / lengths.clamp(min=1).unsqueeze(1).to(h.dtype)  # (B, 1)


def masked_max(h: Tensor, lengths: Tensor) -> Tensor:
    """Max over the real positions (a row of length 0 gives -inf)."""
    if bool((lengths >= h.shape[1]).all()):
        return h.amax(1)
    return h.masked_fill(~keep_positions(lengths, h.shape[1]).unsqueeze(-1), float("-inf")).amax(1)
