"""The int8 linear layer the engines run (``QuantLinear``), and the packed layer program over it (``QuantLayer``).

``QuantLinear`` takes an int8 spec ``Linear`` (``quant.py``) and answers ``PackedLinear``'s calls (``rows``, ``add``,
``add_norm``, ``norm_rows``): each input row quantised on its own, the integer sums, then the scales, bias,
activation and residual in float32. The integer sums run

- through torch's fbgemm int8 GEMM where it runs (``torch.ops.quantized``, the "x86" engine; ``fbgemm_runs``
  checks it on this CPU against the exact reference): W packed once, per-channel; the activations given as
  integers with scale 1 and zero point ACT_MAX + 1, so its u8 inputs are a + 64 in [1, 127] and its int32 sums
  are exactly ``quant.int8_product_reference``'s (tested). On a CPU without AVX512-VNNI its kernels multiply with
  AVX2's ``vpmaddubsw``: hence ``quant.ACT_MAX`` = 63.
- else through ``quant.int8_product_reference`` (float64 products of the integers: exact, several times slower
  than float32), said once on the ``attnkit`` logger.

attnkit's own int8 kernels for these products (VNNI, or AVX2's widened products) are not written yet.
"""

from __future__ import annotations

import functools
import logging
import warnings

import torch
from torch import Tensor

from .layer import PackedLayer
from .packed import PackedLinear, _activate
from .quant import ACT_MAX, int8_product_reference, is_int8, outlier_product, outliers, quantize_rows, split_outliers
from .spec import Layer, Linear, Norm, Settings

__all__ = ["QuantLinear", "QuantLayer", "fbgemm_runs", "linear_for", "packed_layer", "int8_path"]

log = logging.getLogger("attnkit")
_ZERO_POINT = ACT_MAX + 1  # fbgemm's u8 input: a + 64 in [1, 127]


def _pack(q: Tensor, scale: Tensor):
    """q (N, K) int8, scale (N,) -> fbgemm's packed per-channel weight (no bias: added in the epilogue)."""
    with warnings.catch_warnings():  # torch deprecates its quantized tensors; the kernels still run
        warnings.simplefilter("ignore")
        w = torch.quantize_per_channel(q.float() * scale[:, None], scale.double(),
                                       torch.zeros(len(scale), dtype=torch.long), 0, torch.qint8)  # int_repr: q
        return torch.ops.quantized.linear_prepack(w, None)


def _fbgemm_sums(a: Tensor, packed) -> Tensor:
    """a (M, K) float32 integers in [-ACT_MAX, ACT_MAX] -> sum_k a q scale (M, N) float32 through fbgemm."""
    return torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32(a, 1.0, _ZERO_POINT, packed)


@functools.cache
def fbgemm_runs() -> bool:
    """Whether torch's fbgemm int8 GEMM runs here and gives the exact integer sums on a small case with the largest
    products (the case a saturating 16-bit intermediate gets wrong)."""
    try:
        g = torch.Generator().manual_seed(0)
        q = torch.randint(-127, 128, (20, 64), generator=g, dtype=torch.int8)
        q[0], q[1] = 127, -127
        a = torch.randint(-ACT_MAX, ACT_MAX + 1, (5, 64), generator=g).float()
        a[0], a[1] = ACT_MAX, -ACT_MAX
        got = _fbgemm_sums(a, _pack(q, torch.ones(20)))
        return bool(torch.equal(got.double(), int8_product_reference(a, q)))
    except (AttributeError, RuntimeError):
        return False


@functools.cache
def int8_path() -> str:
    """"fbgemm" or "reference": how int8 products run here (said once on the ``attnkit`` logger)."""
    path = "fbgemm" if fbgemm_runs() else "reference"
    vnni = getattr(torch.cpu, "_is_vnni_supported", lambda: False)()
    if path == "fbgemm":
        cpu = "" if vnni else (" on this CPU without AVX512-VNNI (AVX2 products: about float32's speed on batches of "
                               "sentences, slower when decoding)")
        log.warning("attnkit: int8 runs torch's fbgemm int8 products%s, activations in 7 bits; the feed-forward's "
                    "second product stays float32; see docs/int8.md", cpu)
    else:
        log.warning("attnkit: int8 runs its exact reference products here (float64, slower than float32: torch's "
                    "fbgemm int8 kernels are missing); the feed-forward's second product stays float32; see "
                    "docs/int8.md")
    return path


class QuantLinear:
    """act(x W^T + b) with W in int8 (per-channel scales), x quantised per row at run time. (..., in) -> (..., out).
    ``PackedLinear``'s calls (see the module doc); ``reference=True`` always takes the exact reference."""

    small = None  # no native kernel: the compositions (``inference.native``) leave int8 layers to this program

    def __init__(self, linear: Linear, activation: str = "none", *, reference: bool | None = None):
        if not is_int8(linear) or linear.scale is None:
            raise ValueError("QuantLinear: needs an int8 spec Linear with its `scale` (quant.quantize_linear)")
        self.out_features, self.in_features = linear.weight.shape
        self.activation = activation
        self.weight, self.scale, self.bias = linear.weight, linear.scale.float(), linear.bias
        self.reference = int8_path() == "reference" if reference is None else reference
        self.outliers = outliers(self.in_features)  # input channels kept in float32 per call
        self.weight_t = self.weight.T.contiguous()  # (in, out) int8: the outlier channels' weights, by row
        self.packed = None if self.reference else _pack(self.weight, self.scale)

    def product(self, x: Tensor) -> Tensor:
        """x (M, in) -> x W^T (M, out) float32: the integer sums, and the outlier channels' float share
        (``quant.split_outliers``), before bias and activation."""
        rest, idx, columns = split_outliers(x, self.outliers)
        a, s = quantize_rows(rest)
        if self.packed is None:
            y = (int8_product_reference(a, self.weight) * (s.double() * self.scale.double())).float()
        else:
            y = _fbgemm_sums(a, self.packed).mul_(s)
        return outlier_product(y, columns, idx, self.weight_t, self.scale) if self.outliers else y

    def rows(self, x: Tensor) -> Tensor:
        """act(x W^T + b): x (N, in) -> (N, out) float32."""
        y = self.product(x)
        return _activate(y if self.bias is None else y.add_(self.bias), self.activation)

    def add(self, x: Tensor, other: Tensor) -> Tensor:
        """x W^T + b + other (no activation). x (N, in), other (N, out) -> (N, out)."""
        if self.activation != "none":
            raise ValueError("QuantLinear.add: only for activation 'none'")
        return self.rows(x).add_(other)

    def add_norm(self, x: Tensor, other: Tensor, norm: Norm) -> Tensor:
        """norm(other + x W^T + b) (post-LN). x (N, in), other (N, out) -> (N, out)."""
        return norm(self.add(x, other))

    def norm_rows(self, x: Tensor, norm: Norm) -> Tensor:
        """act(norm(x) W^T + b). x (N, in) -> (N, out)."""
        return self.rows(norm(x))

    def small_weight(self, rows: int) -> None:
        return None

    def prepare_small(self) -> QuantLinear:
        return self

    def __call__(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        return self.rows(x.reshape(-1, self.in_features)).view(*lead, self.out_features)

    forward = __call__

    def __repr__(self) -> str:
        path = "reference" if self.reference else "fbgemm"
        return (f"QuantLinear(in_features={self.in_features}, out_features={self.out_features}, "
                f"activation={self.activation}, int8 via {path})")


def linear_for(linear: Linear, activation: str = "none") -> PackedLinear | QuantLinear:
    """The engines' linear layer of a spec ``Linear``: ``QuantLinear`` for int8 weights, else ``PackedLinear``."""
    return QuantLinear(linear, activation) if is_int8(linear) else PackedLinear(linear, activation)


class QuantLayer(PackedLayer):
    """``PackedLayer``'s program over a spec ``Layer`` whose linear layers are int8 (``QuantLinear``; any float one
    stays a ``PackedLinear``); attention, softmax and the LayerNorms stay float32. ``cross_kv`` stays a spec
    ``Linear`` (int8, with its scale)."""

    make_linear = staticmethod(linear_for)


def packed_layer(layer: Layer, settings: Settings) -> PackedLayer:
    """The engines' packed layer of a spec ``Layer``: ``QuantLayer`` where any of its linear layers is int8 (each
    of the others stays a float ``PackedLinear``)."""
    linears = (layer.qkv, layer.self_out, layer.ff1, layer.ff2) + ((layer.cross.qkv, layer.cross.out) if layer.cross
                                                                   else ())
    return QuantLayer(layer, settings) if any(is_int8(m) for m in linears) else PackedLayer(layer, settings)
