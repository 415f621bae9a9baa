"""The int8 linear layer the engines run (``QuantLinear``), and the packed layer program over it (``QuantLayer``).

``QuantLinear`` takes an int8 spec ``Linear`` (``quant.py``) and answers ``PackedLinear``'s calls (``rows``, ``add``,
``add_norm``, ``norm_rows``): each input row quantised on its own, the integer sums, then the scales, bias,
activation and residual in float32. The products run, first that runs here (``int8_path``, said once on the
``attnkit`` logger):

- "native": attnkit's own int8 kernel (``int8_linear`` of the native kernels' variant: AVX2's ``vpmaddubsw`` with
  the sign moved onto the weights, AVX-512's, AVX512-VNNI's ``vpdpbusd``, NEON's ``sdot``: ``csrc/vec_int8.h``),
  W packed once (``quant_packed.Int8Packed``), the rows quantised, the outlier channels, the integer sums and the
  epilogue (bias, activation, residual, LayerNorm) in one call; activations in 8 bits (``quant.NATIVE_ACT_MAX``),
  as the kernel's products cannot saturate;
- "fbgemm": torch's fbgemm int8 GEMM (``torch.ops.quantized``, the "x86" engine; ``fbgemm_runs`` checks it on this
  CPU against the exact reference): W packed once, per-channel; the activations given as integers with scale 1
  and zero point ACT_MAX + 1, so its u8 inputs are a + 64 in [1, 127] and its int32 sums are exactly
  ``quant.int8_product_reference``'s (tested). On a CPU without AVX512-VNNI its kernels multiply with AVX2's
  ``vpmaddubsw``, which saturates on 8-bit u8 x s8 pairs: hence ``quant.ACT_MAX`` = 63 (7 bits) on this path;
- "reference": ``quant.int8_product_reference`` (float64 products of the integers: exact, several times slower
  than float32).

Every path is tested against ``quant.int8_linear_reference`` with its own activations' bound (``act_max``).
"""

from __future__ import annotations

import functools
import logging
import warnings

import torch
from torch import Tensor

from .layer import PackedLayer
from .packed import ACTIVATION_IDS, PackedLinear, _activate
from .quant import (
    ACT_MAX,
    FLOAT_LINEARS,
    NATIVE_ACT_MAX,
    int8_product_reference,
    is_int8,
    outlier_channels,
    outlier_product,
    outliers,
    quantize_rows,
)
from .quant_packed import BLOCKED_ROWS, Int8Packed, int8_kernel
from .spec import Layer, Linear, Norm, Settings

__all__ = ["QuantLinear", "QuantLayer", "fbgemm_runs", "linear_for", "packed_layer", "int8_path", "PATHS",
           "float_linears"]

log = logging.getLogger("attnkit")
_ZERO_POINT = ACT_MAX + 1  # fbgemm's u8 input: a + 64 in [1, 127]
PATHS = ("native", "fbgemm", "reference")


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


_SAID: set[str] = set()


def int8_path() -> str:
    """"native", "fbgemm" or "reference": how int8 products run here (see the module doc), said once per path on the
    ``attnkit`` logger."""
    path = "native" if int8_kernel() is not None else "fbgemm" if fbgemm_runs() else "reference"
    if path not in _SAID:
        _SAID.add(path)
        if path == "native":
            log.info("attnkit: int8 runs attnkit's int8 kernels, activations in 8 bits; see docs/int8.md")
        elif path == "fbgemm":
            log.warning("attnkit: int8 runs torch's fbgemm int8 products (attnkit's native kernels do not run here), "
                        "activations in 7 bits; see docs/int8.md")
        else:
            log.warning("attnkit: int8 runs its exact reference products here (float64, slower than float32: neither "
                        "attnkit's native kernels nor torch's fbgemm int8 kernels run); see docs/int8.md")
    return path


def float_linears() -> tuple[str, ...]:
    """What ``quant.quantize_spec`` leaves in float32 for the path int8 runs here: nothing on the native kernels
    (8-bit activations: MiniLM's cosine to float32 0.99914 mean, 0.99853 worst over 400 sentences, every linear
    layer in int8), ``quant.FLOAT_LINEARS`` elsewhere (7 bits: ``ff2`` in int8 costs MiniLM 0.0009 of cosine)."""
    return () if int8_path() == "native" else FLOAT_LINEARS


class QuantLinear:
    """act(x W^T + b) with W in int8 (per-channel scales), x quantised per row at run time. (..., in) -> (..., out).
    ``PackedLinear``'s calls (see the module doc). ``path``: "native", "fbgemm" or "reference" (default:
    ``int8_path()``); ``act_max``: the rows' integers' bound (default: the path's, 127 native, else 63)."""

    small = None  # no float small kernel: the compositions (``inference.native``) take ``native_weight`` instead

    def __init__(self, linear: Linear, activation: str = "none", *, path: str | None = None,
                 act_max: int | None = None):
        if not is_int8(linear) or linear.scale is None:
            raise ValueError("QuantLinear: needs an int8 spec Linear with its `scale` (quant.quantize_linear)")
        if path not in (None, *PATHS):
            raise ValueError(f"QuantLinear: `path` must be one of {', '.join(PATHS)} or None, got {path!r}")
        self.out_features, self.in_features = linear.weight.shape
        self.activation = activation
        self.weight, self.scale, self.bias = linear.weight, linear.scale.float(), linear.bias
        self.path = path or int8_path()
        self.act_max = act_max or (NATIVE_ACT_MAX if self.path == "native" else ACT_MAX)
        self.outliers = outliers(self.in_features)  # input channels kept in float32 per call
        self.kernel = int8_kernel() if self.path == "native" else None
        if self.path == "native" and self.kernel is None:
            raise ValueError("QuantLinear: path 'native' needs attnkit's native kernels, which do not run here")
        # W packed once for the path: the native kernel's layouts, or fbgemm's
        self.native_weight = Int8Packed(linear, self.act_max) if self.kernel is not None else None
        self.weight_t = self.weight.T.contiguous() if self.kernel is None else None  # (in, out): outliers' rows
        self._shift_weights = (self.weight.sum(1, dtype=torch.float64) * self.scale.double()).float()[None]  # (1, out)
        self._fbgemm = _pack(self.weight, self.scale) if self.path == "fbgemm" else None
        self._act_id = ACTIVATION_IDS[activation]

    def product(self, x: Tensor) -> Tensor:
        """x (M, in) -> x W^T (M, out) float32 on the fbgemm or reference path: the integer sums, the shift's share
        and the outlier channels' float share (``quant``'s module doc), before bias and activation."""
        idx = outlier_channels(x, self.outliers)
        a, s, c = quantize_rows(x, self.act_max, idx)
        if self._fbgemm is None:
            y = (int8_product_reference(a, self.weight) * (s.double() * self.scale.double())).float()
        else:
            y = _fbgemm_sums(a, self._fbgemm).mul_(s)
        y.addmm_(c, self._shift_weights)  # c sum_k q scale: (M, 1) (1, out)
        return outlier_product(y, x, c, idx, self.weight_t, self.scale) if len(idx) else y

    def _native(self, x: Tensor, *args) -> Tensor:
        """The native kernel on x (M, in) float32 (made contiguous) with ``int8_linear``'s other arguments."""
        x = x.float().contiguous()
        return self.kernel(x, self.native_weight.weight(x.shape[0]), *args)

    def rows(self, x: Tensor, limit: int | None = None) -> Tensor:
        """act(x W^T + b): x (N, in) -> (N, out) float32 (``limit``: ``PackedLinear``'s, taken and not needed)."""
        if self.kernel is not None:
            return self._native(x, None, self._act_id)
        y = self.product(x)
        return _activate(y if self.bias is None else y.add_(self.bias), self.activation)

    def add(self, x: Tensor, other: Tensor) -> Tensor:
        """x W^T + b + other (no activation). x (N, in), other (N, out) -> (N, out)."""
        if self.activation != "none":
            raise ValueError("QuantLinear.add: only for activation 'none'")
        if self.kernel is not None:
            return self._native(x, other.float().contiguous(), 0)
        return self.rows(x).add_(other)

    def add_norm(self, x: Tensor, other: Tensor, norm: Norm) -> Tensor:
        """norm(other + x W^T + b) (post-LN). x (N, in), other (N, out) -> (N, out): with an affine LayerNorm in one
        native call."""
        if self.kernel is not None and norm.affine and self.out_features % 16 == 0 and self.activation == "none":
            return self._native(x, other.float().contiguous(), 0, norm.weight, norm.bias, norm.eps)
        return norm(self.add(x, other))

    def norm_rows(self, x: Tensor, norm: Norm, limit: int | None = None) -> Tensor:
        """act(norm(x) W^T + b). x (N, in) -> (N, out): with an affine LayerNorm in one native call (``limit``: as
        ``rows``)."""
        if self.kernel is not None and norm.affine and self.in_features % 16 == 0:
            return self._native(x, None, self._act_id, None, None, norm.eps, norm.weight, norm.bias)
        return self.rows(norm(x))

    def small_weight(self, rows: int) -> None:
        return None

    def panels_from(self) -> int:
        """The rows from which the native kernel takes W in panels (``PackedLinear.panels_from``'s question)."""
        return BLOCKED_ROWS + 1

    def prepare_small(self) -> QuantLinear:
        return self

    def __call__(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        return self.rows(x.reshape(-1, self.in_features)).view(*lead, self.out_features)

    forward = __call__

    def __repr__(self) -> str:
        return (f"QuantLinear(in_features={self.in_features}, out_features={self.out_features}, "
                f"activation={self.activation}, int8 via {self.path}, activations in [-{self.act_max}, "
                f"{self.act_max}])")


def linear_for(linear: Linear, activation: str = "none") -> PackedLinear | QuantLinear:
    """The engines' linear layer of a spec ``Linear``: ``QuantLinear`` for int8 weights, else ``PackedLinear``."""
    return QuantLinear(linear, activation) if is_int8(linear) else PackedLinear(linear, activation)


class QuantLayer(PackedLayer):
    """``PackedLayer``'s program over a spec ``Layer`` whose linear layers are int8 (``QuantLinear``; any float one
    stays a ``PackedLinear``); attention, softmax and the LayerNorms stay float32. ``cross_kv`` stays a spec
    ``Linear`` (int8, with its scale)."""

    make_linear = staticmethod(linear_for)

    def normed(self, linear: PackedLinear | QuantLinear, x: Tensor, norm: Norm) -> Tensor:
        """Pre-LN's act(norm(x) W^T + b) with the norm inside an int8 layer's kernel where it runs (the rows it
        quantises are then those the native compositions quantise, bit for bit)."""
        return linear.norm_rows(x, norm) if isinstance(linear, QuantLinear) else linear.rows(norm(x))


def packed_layer(layer: Layer, settings: Settings) -> PackedLayer:
    """The engines' packed layer of a spec ``Layer``: ``QuantLayer`` where any of its linear layers is int8 (each
    of the others stays a float ``PackedLinear``)."""
    linears = (layer.qkv, layer.self_out, layer.ff1, layer.ff2) + ((layer.cross.qkv, layer.cross.out) if layer.cross
                                                                   else ())
    return QuantLayer(layer, settings) if any(is_int8(m) for m in linears) else PackedLayer(layer, settings)
