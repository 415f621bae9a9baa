"""oneDNN pre-packed linear layers, and attnkit's native kernel for a few rows: ``PackedLinear``.

``torch.nn.Linear`` on CPU runs float32 through MKL's sgemm, reordering nothing ahead of time; oneDNN
(``torch.ops.mkldnn._linear_pointwise``, the kernel ``torch.compile`` uses for frozen CPU models) takes weights
packed once into its blocked layout, and can apply the activation (and a residual sum) as post-ops of the same
kernel. ``PackedLinear`` holds a weight packed so, and sends products of a few rows to attnkit's native
``small_linear`` where it runs. Weights are copied, never trained. Where the oneDNN ops are missing (or cannot
take the dtype) it runs ``F.linear``.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..functional import native
from ..functional.norm import add_layer_norm, add_norm_kernel_runs
from .spec import Norm

__all__ = ["PackedLinear", "onednn_available", "post_op_keeps_nan", "SMALL_ROWS", "LAYER_ROWS", "PANEL_ROWS",
           "ACTIVATION_IDS"]

SMALL_ROWS = 4  # at most this many rows: attnkit's native small_linear kernel (one sequential pass over W)
LAYER_ROWS = 32  # at most this many rows (B * L, a sentence): W in panels; a whole layer in one native call
# the panels against oneDNN past 32 rows, which set PANEL_ROWS and PANEL_INPUTS (wider inputs keep LAYER_ROWS):
# BENCHMARKS.md, "Linear layers of a few rows"
PANEL_ROWS = 40  # at most this many rows of at most PANEL_INPUTS inputs: the native panels, not oneDNN
PANEL_INPUTS = 768
ACTIVATION_IDS = {"none": 0, "relu": 1, "silu": 2, "gelu": 3, "gelu_tanh": 4}
# attnkit activation -> oneDNN post-op (attr, algorithm) of ``_linear_pointwise``
_POST_OPS = {"none": ("none", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh"), "relu": ("relu", ""),
             "silu": ("swish", "")}


@functools.cache
def onednn_available(dtype: torch.dtype = torch.float32) -> bool:
    """True when torch's oneDNN linear ops exist for ``dtype`` on this CPU and agree with ``F.linear`` on a
    small case (oneDNN packs bfloat16 only where the CPU has AVX512-BW/VL/DQ or AVX-NE-CONVERT)."""
    try:
        ops = torch.ops.mkldnn
        x, w, b = (torch.randn(3, 8, dtype=dtype), torch.randn(4, 8, dtype=dtype), torch.randn(4, dtype=dtype))
        packed, other = ops._reorder_linear_weight(w, None), torch.randn(3, 4, dtype=dtype)
        y = ops._linear_pointwise(x, packed, b, "none", [], "")
        z = ops._linear_pointwise.binary(x, other, packed, b, "add")
        ref = torch.nn.functional.linear(x, w, b)
        tol = 1e-5 if dtype == torch.float32 else 5e-2
        return (bool(torch.backends.mkldnn.is_available()) and torch.allclose(y, ref, atol=tol, rtol=tol)
                and torch.allclose(z, ref + other, atol=tol, rtol=tol))
    except (AttributeError, RuntimeError):
        return False


@functools.cache
def post_op_keeps_nan(activation: str) -> bool:
    """Whether oneDNN's post-op for ``activation`` gives NaN for a NaN input on this CPU, as PyTorch's does
    (on AVX2 its ReLU is max(0, x), which turns NaN into 0; attnkit's NaN policy propagates it)."""
    if activation == "none" or not onednn_available():
        return True
    x = torch.full((1, 8), float("nan"))
    packed = torch.ops.mkldnn._reorder_linear_weight(torch.ones(4, 8), None)
    attr, algorithm = _POST_OPS[activation]
    return bool(torch.ops.mkldnn._linear_pointwise(x, packed, None, attr, [], algorithm).isnan().all())


def _activate(y: Tensor, activation: str) -> Tensor:
    """The activations ``PackedLinear`` runs inside oneDNN, in PyTorch (where oneDNN cannot take the dtype)."""
    if activation == "gelu":
        return F.gelu(y)
    if activation == "gelu_tanh":
        return F.gelu(y, approximate="tanh")
    if activation == "relu":
        return F.relu(y)
    if activation == "silu":
        return F.silu(y)
    return y


class PackedLinear(nn.Module):
    """act(x W^T + b) with W packed for oneDNN. (..., in_features) -> (..., out_features).

    ``activation``: "none", or one of attnkit's activations applied inside the kernel: "gelu" (exact,
    erf), "gelu_tanh", "relu", "silu" (oneDNN's "swish").

    Inputs of at most ``PANEL_ROWS`` rows go to attnkit's native ``small_linear`` where it runs (every variant;
    in_features a multiple of 16), with bias, activation and residual in the same pass and a fraction of
    oneDNN's per-call cost. W is copied once into the kernel's layout for the rows (on the first such call; N
    rounded up to 16 with zero rows):

    - up to ``SMALL_ROWS`` rows (a decoding step): blocked, 4 rows of W interleaved in chunks of 16, one
      sequential pass over W;
    - up to ``PANEL_ROWS`` (40, a sentence; ``LAYER_ROWS``, 32, past ``PANEL_INPUTS`` inputs): panels of 16 columns,
      (N / 16, K, 16), rows of x broadcast against them with no horizontal sums. bfloat16 panels interleave pairs of
      inputs, (N / 16, K / 2, 16, 2), for AVX512-BF16's dot products of pairs; they take bfloat16 from 2 rows, and
      CPUs without AVX512-BF16 keep bfloat16 blocked, up to ``LAYER_ROWS`` (32) rows.

    The measured times of both against oneDNN are in BENCHMARKS.md ("Linear layers of a few rows").
    """

    def __init__(self, linear, activation: str = "none"):
        super().__init__()
        if activation not in _POST_OPS:
            raise ValueError(f"PackedLinear: `activation` must be one of {sorted(_POST_OPS)}, got {activation!r}")
        self.out_features, self.in_features = linear.weight.shape
        self.activation = activation
        self.weight = linear.weight.detach()  # kept for code that reads slices of it (e.g. cross-attention)
        self.bias = None if linear.bias is None else linear.bias.detach()
        # oneDNN's layout in the same dtype, or None where oneDNN cannot take it here (then ``F.linear``)
        self.packed = (torch.ops.mkldnn._reorder_linear_weight(self.weight, None)
                       if onednn_available(self.weight.dtype) else None)
        self.small = _small_kernel(self.weight)  # the native kernel for a few rows, or None
        self._act_id = ACTIVATION_IDS[activation]
        # the activation as oneDNN's post-op where it keeps NaN as NaN here, else in PyTorch after the product
        self._in_kernel = post_op_keeps_nan(activation)
        attr, algorithm = _POST_OPS[activation if self._in_kernel else "none"]
        self._post_op = (attr, [], algorithm)
        # post-LN at more rows: attnkit's residual-and-LayerNorm kernel after the product, where it runs (``add_norm``)
        self._native_norm = add_norm_kernel_runs(self.weight.dtype, self.out_features)
        self._blocked: Tensor | None = None  # W as the small kernel reads it, made on first use
        self._panels: Tensor | None = None
        pad = -self.out_features % 16
        self._small_bias = self.bias if self.bias is None or not pad else F.pad(self.bias, (0, pad))

    def small_weight(self, rows: int, limit: int | None = None) -> Tensor | None:
        """W as the native kernel takes it for this many rows (see the class doc), or None: oneDNN's rows; ``limit``:
        the panels up to that many rows instead of ``PANEL_ROWS`` (``native_layouts``' choice, as a one-call pass
        makes it)."""
        wide = self.panels_from() <= LAYER_ROWS and self.in_features <= PANEL_INPUTS
        if self.small is None or rows > ((limit or PANEL_ROWS) if wide else LAYER_ROWS):
            return None  # past the panels' rows (or, bfloat16 without AVX512-BF16, the blocked ones'): oneDNN
        return self.panel_weight() if rows >= self.panels_from() else self.blocked_weight()

    def panels_from(self) -> int:
        """The rows from which ``small_weight`` is W in panels (blocked below): bfloat16 from 2 where
        AVX512-BF16 runs (else never), float32 past ``SMALL_ROWS``."""
        if self.weight.dtype == torch.bfloat16:
            return 2 if _has_bf16() else LAYER_ROWS + 1
        return SMALL_ROWS + 1

    def native_layouts(self) -> dict:
        """W blocked and in panels, the padded bias (an empty tensor: none), the rows from which the panels are
        used and the layer's own outputs: the fields of the native ``PackedRows`` (``NatFirstPass``'s linear
        layers, which choose their layout by the rows)."""
        bias = self._small_bias if self._small_bias is not None else self.weight.new_empty(0)
        return dict(blocked=self.blocked_weight(), panels=self.panel_weight(), bias=bias,
                    panels_from=self.panels_from(), outputs=self.out_features)

    def add(self, x: Tensor, other: Tensor) -> Tensor:
        """x W^T + b + other in one kernel (no activation). x (N, in), other (N, out) -> (N, out)."""
        if self.activation != "none":
            raise ValueError("PackedLinear.add: only for activation 'none'")
        w = self.small_weight(x.shape[0])
        if w is not None and self.out_features % 16 == 0 and x.is_contiguous() and other.is_contiguous():
            return self.small(x, w, self._small_bias, other, 0)
        if self.packed is None:
            return F.linear(x, self.weight, self.bias) + other
        return torch.ops.mkldnn._linear_pointwise.binary(x, other, self.packed, self.bias, "add")

    def add_norm(self, x: Tensor, other: Tensor, norm: Norm) -> Tensor:
        """norm(other + x W^T + b) (post-LN's residual and norm; no activation). x (N, in), other (N, out) ->
        (N, out). At a few rows one native call (the sum kept in float32); else, for an affine LayerNorm where
        attnkit's native kernel runs, the product then that kernel (``functional.norm.add_layer_norm``); else the
        sum inside oneDNN's product, then the norm."""
        w = self.small_weight(x.shape[0])
        if (w is not None and norm.affine and self.out_features % 16 == 0 and x.is_contiguous()
                and other.is_contiguous() and self.activation == "none"):
            return self.small(x, w, self._small_bias, other, 0, norm.weight, norm.bias, norm.eps)
        if norm.affine and self._native_norm:
            return add_layer_norm(self.rows(x), other, norm.weight, norm.bias, norm.eps)
        return norm(self.add(x, other))

    def prepare_small(self) -> PackedLinear:
        """Make the small kernel's copy of W now rather than on the first call of a few rows; returns self."""
        if self.small is not None:
            self.blocked_weight()
        return self

    def _padded_weight(self) -> Tensor:
        """W (N, K) -> (N', K), N' = N rounded up to 16 with zero rows."""
        pad = -self.out_features % 16
        return F.pad(self.weight, (0, 0, 0, pad)) if pad else self.weight

    def blocked_weight(self) -> Tensor:
        """W -> (N' / 4, K / 16, 4, 16): each 4 rows interleaved in chunks of 16, one stream for the kernel."""
        if self._blocked is None:
            w = self._padded_weight()
            n, k = w.shape
            self._blocked = w.reshape(n // 4, 4, k // 16, 16).permute(0, 2, 1, 3).contiguous()
        return self._blocked

    def panel_weight(self) -> Tensor:
        """W -> W^T in panels of 16 columns (made on first use): float32 (N' / 16, K, 16); bfloat16
        (N' / 16, K / 2, 16, 2), each two inputs interleaved (the pairs vdpbf16ps multiplies)."""
        if self._panels is None:
            w = self._padded_weight()
            n, k = w.shape
            if w.dtype == torch.bfloat16:  # (N', K) -> (N'/16, 16, K/2, 2) -> (N'/16, K/2, 16, 2)
                self._panels = w.reshape(n // 16, 16, k // 2, 2).permute(0, 2, 1, 3).contiguous()
            else:  # (N', K) -> (N'/16, K, 16)
                self._panels = w.reshape(n // 16, 16, k).transpose(1, 2).contiguous()
        return self._panels

    def rows(self, x: Tensor, limit: int | None = None) -> Tensor:
        """act(x W^T + b) for x (N, in) -> (N, out), with no reshaping (the decoders' per-step call); ``limit``: see
        ``small_weight``."""
        w = self.small_weight(x.shape[0], limit)
        if w is not None and x.is_contiguous():
            y = self.small(x, w, self._small_bias, None, self._act_id)
            return y if y.shape[1] == self.out_features else y[:, :self.out_features]  # padding rows dropped
        if self.packed is None:
            return _activate(F.linear(x, self.weight, self.bias), self.activation)
        y = torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, *self._post_op)
        return y if self._in_kernel else _activate(y, self.activation)

    def norm_rows(self, x: Tensor, norm: Norm, limit: int | None = None) -> Tensor:
        """act(norm(x) W^T + b) for x (N, in) -> (N, out): an affine LayerNorm inside the kernel's widening of x at
        a few rows (one call), else the norm then ``rows``; ``limit``: see ``small_weight``."""
        w = self.small_weight(x.shape[0], limit)
        if w is not None and norm.affine and x.is_contiguous():
            y = self.small(x, w, self._small_bias, None, self._act_id, None, None, norm.eps, norm.weight, norm.bias)
            return y if y.shape[1] == self.out_features else y[:, :self.out_features]
        return self.rows(norm(x), limit)

    def forward(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        y = self.rows(x.reshape(-1, self.in_features))  # (..., in) -> (N, in) -> (N, out)
        return y.view(*lead, self.out_features)  # -> (..., out)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, activation={self.activation}"


@functools.cache
def _bf16_of(kernel) -> bool:
    return bool(kernel.cpu_has_bf16())


def _has_bf16() -> bool:
    """Whether the native kernels' variant runs AVX512-BF16 instructions on this CPU (the AVX-512 variant only)."""
    kernel = native.kernel()
    return kernel is not None and _bf16_of(kernel)


def _small_kernel(weight: Tensor):
    """The native ``small_linear`` function for this weight, or None where it does not run."""
    if weight.device.type != "cpu" or weight.dtype not in (torch.float32, torch.bfloat16) or weight.shape[1] % 16:
        return None
    kernel = native.kernel()
    return None if kernel is None else getattr(kernel, "small_linear", None)
