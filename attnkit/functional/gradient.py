"""Gradient reversal (Ganin and Lempitsky 2015): the identity forward, the gradient times ``-scale`` backward.

A classifier read through it learns to tell its classes apart while the layers below it are pushed to make
them indistinguishable: speaker-adversarial training (``attnkit train asr --speaker-adversarial``) so trains an
encoder whose features say what was said, not who said it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["grad_reverse"]


class _Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        return grad * -ctx.scale, None


def grad_reverse(x: Tensor, scale: float = 1.0) -> Tensor:
    """x unchanged; backward, its gradient times ``-scale`` (a finite number >= 0; 0 stops the gradient)."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale < 0:
        raise ValueError(f"grad_reverse: `scale` must be a finite number >= 0, got {scale!r}")
    return _Reverse.apply(x, float(scale))
