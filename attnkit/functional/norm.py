"""Residual addition then LayerNorm, LN(x + r): how both halves of a post-LN encoder layer end.

    y = x + r;  out = (y - mean(y)) / sqrt(var(y) + eps) * weight + bias   over the last dimension

``add_layer_norm`` is the math, ``F.layer_norm(x + r, ...)``, which is also the reference. For
inference it runs attnkit's native kernel instead (``native/csrc/add_norm.h``): one
pass over memory rather than an addition and a LayerNorm, float32 arithmetic inside for float32 and
bfloat16 storage. The one difference in bfloat16: the kernel keeps x + r in float32, where the math
rounds it to bfloat16 before the statistics.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .native import kernel as native_kernel

__all__ = ["add_layer_norm", "add_norm_kernel_runs"]


def add_norm_kernel_runs(dtype: torch.dtype, d: int) -> bool:
    """Whether the native kernel takes rows of ``d`` features in ``dtype`` here."""
    return dtype in (torch.float32, torch.bfloat16) and d % 16 == 0 and native_kernel() is not None


def _native_ok(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    tensors = (x, residual, weight, bias)
    return (bias is not None and x.device.type == "cpu" and residual.shape == x.shape
            and all(t.dtype == x.dtype and t.device == x.device for t in tensors)
            and weight.shape == bias.shape == x.shape[-1:]
            and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))
            and add_norm_kernel_runs(x.dtype, x.shape[-1]))


def add_layer_norm(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor | None, eps: float,
                   *, native: bool = True) -> Tensor:
    """LayerNorm(x + residual) over the last dimension. x, residual (..., d); weight, bias (d,) -> (..., d).

    ``native=False`` forces the math. The kernel runs only without gradients, on CPU, float32 or
    bfloat16 everywhere, d a multiple of 16 and a bias; anything else takes the math.
    """
    if native and _native_ok(x, residual, weight, bias):
        return native_kernel().add_norm(x.contiguous(), residual.contiguous(), weight.contiguous(),
                                        bias.contiguous(), float(eps))
    return F.layer_norm(x + residual, x.shape[-1:], weight, bias, eps)
