"""Inference-only speed-ups for an encoder copy: oneDNN pre-packed linear layers.

``torch.nn.Linear`` on CPU runs float32 through MKL's sgemm, reordering nothing ahead of time;
oneDNN (``torch.ops.mkldnn._linear_pointwise``, the kernel ``torch.compile`` uses for frozen CPU
models) takes weights packed once into its blocked layout, and can apply GELU as a post-op of the
same kernel. ``pack_linears`` swaps every ``nn.Linear`` of a model for a ``PackedLinear`` (and folds
a FeedForward's exact GELU into its first linear layer). Weights are copied, never trained: use it
on an inference copy only. Where the oneDNN ops are missing it changes nothing.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..nn.blocks import FeedForward

__all__ = ["PackedLinear", "pack_linears", "onednn_available"]

_OK: bool | None = None


def onednn_available() -> bool:
    """True when torch's oneDNN linear ops exist and agree with ``F.linear`` on a small case."""
    global _OK
    if _OK is None:
        try:
            ops = torch.ops.mkldnn
            x, w, b = torch.randn(3, 8), torch.randn(4, 8), torch.randn(4)
            y = ops._linear_pointwise(x, ops._reorder_linear_weight(w, None), b, "none", [], "")
            _OK = bool(torch.backends.mkldnn.is_available()) and torch.allclose(
                y, torch.nn.functional.linear(x, w, b), atol=1e-5)
        except (AttributeError, RuntimeError):
            _OK = False
    return _OK


class PackedLinear(nn.Module):
    """act(x W^T + b) with W packed for oneDNN. (..., in_features) -> (..., out_features).

    ``activation``: "none" or "gelu" (exact, erf) applied inside the kernel.
    """

    def __init__(self, linear: nn.Linear, activation: str = "none"):
        super().__init__()
        if activation not in ("none", "gelu"):
            raise ValueError(f"PackedLinear: `activation` must be 'none' or 'gelu', got {activation!r}")
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.activation = activation
        self.weight = linear.weight.detach()  # kept for code that reads slices of it (e.g. cross-attention)
        self.bias = None if linear.bias is None else linear.bias.detach()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight, None)  # oneDNN layout, same dtype

    def forward(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)  # (..., in) -> (N, in)
        algorithm = "none" if self.activation == "gelu" else ""
        y = torch.ops.mkldnn._linear_pointwise(flat, self.packed, self.bias, self.activation, [], algorithm)
        return y.view(*lead, self.out_features)  # (N, out) -> (..., out)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, activation={self.activation}"


def _identity(x: Tensor) -> Tensor:
    return x


def pack_linears(model: nn.Module) -> nn.Module:
    """Swap (in place) every ``nn.Linear`` for a ``PackedLinear``; returns ``model``.

    A ``FeedForward`` with exact GELU gets it fused into ``linear1`` (its activation becomes the identity).
    No-op when oneDNN is unavailable.
    """
    if not onednn_available():
        return model
    for module in list(model.modules()):
        if isinstance(module, FeedForward) and module.activation == "gelu" and isinstance(module.linear1, nn.Linear):
            module.linear1 = PackedLinear(module.linear1, "gelu")
            module._act = _identity  # GELU now runs inside linear1's kernel
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, PackedLinear(child))
    return model
