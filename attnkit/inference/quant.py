"""int8 as one more dtype of the weight spec: quantised when loaded, no calibration data.

``quantize_spec(spec, keep)`` gives the same ``ModelSpec`` with each layer's linear layers ``qkv``, ``self_out``,
``cross_qkv``, ``cross_out``, ``ff1``, ``ff2`` and the ``output`` layer in int8, but those named in ``keep``: a spec
``Linear`` whose ``weight`` is int8 (N, K) and whose ``scale`` (N,) float32 gives W ~= weight * scale[:, None]
(symmetric, one scale per output channel: the largest |W| of the row maps to 127). The engines keep what their
int8 path needs in float32 (``quant_linear.float_linears``): nothing on attnkit's own kernels (8-bit activations),
``FLOAT_LINEARS`` on torch's fbgemm (7-bit activations: ``ff2``, whose inputs, the activation's outputs, cost the
most accuracy there, and the output layer; docs/int8.md). Everything else stays float32: the token tables,
positions, LayerNorms, attention, a NAT model's length classifier and BERT's pooler.

At run time each input row (token) x is quantised on its own, over its range: with c = (max x + min x) / 2 and
h = (max x - min x) / 2, a = round((x - c) / s), s = h / act_max, so x ~= a s + c; the product is the integers'
sum in int32, the scales and the shift applied in the epilogue with the bias:

    y[i, j] = (s[i] sum_k a[i, k] q[j, k] + sum_{k in O} (x[i, k] - c[i]) q[j, k] + c[i] sum_k q[j, k]) scale[j] + b[j]

The shift gives a lopsided row (a GELU's outputs run from -0.17 to tens) its integers' whole range. O are a few
outlier channels: the ``outliers(K)`` input channels (8 of MiniLM's 384) with the largest |x| in the call are left
out of the rows' ranges and multiplied in float32 against their weight columns (LLM.int8()'s decomposition, chosen
per call: no calibration). A few channels of a Transformer's activations run tens of times larger than the rest
(after LayerNorm and in the feed-forward's hidden layer); left in, they set every row's range and the other
channels get a few levels each.

``act_max``, the integers' bound, is the path's (``quant_linear.py``): ``NATIVE_ACT_MAX`` = 127 (8 bits) on attnkit's
own kernels, whose products cannot saturate; ``ACT_MAX`` = 63 (7 bits) on torch's fbgemm, which on CPUs without
AVX512-VNNI multiplies with ``vpmaddubsw``: it adds pairs of u8 x s8 products into 16 bits and saturates beyond;
with activations in [-63, 63] (shifted to [1, 127]) no pair can, so its int32 sums are exact.
``int8_linear_reference`` is the exact arithmetic (the integer sums in float64, which holds every such sum
exactly), the reference of every faster path.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .spec import LINEARS, CrossAttention, Layer, Linear, ModelSpec, Stack

__all__ = ["ACT_MAX", "NATIVE_ACT_MAX", "WEIGHT_MAX", "quantize_weight", "quantize_rows", "dequantize",
           "quantize_linear", "quantize_spec", "int8_product_reference", "int8_linear_reference", "is_int8", "cat_rows",
           "outliers", "outlier_channels", "outlier_product", "FLOAT_LINEARS", "QUANTISABLE"]

ACT_MAX = 63  # fbgemm's activations, [-63, 63]: exact int32 sums on AVX2's pairwise 16-bit products (module doc)
NATIVE_ACT_MAX = 127  # attnkit's own kernels' activations, [-127, 127]: their products cannot saturate
WEIGHT_MAX = 127
OUTLIERS = 8  # input channels kept in float32 per call (at most K / 8: ``outliers``)
FLOAT_LINEARS = ("ff2", "output")  # what ``quantize_spec`` leaves in float32 by default (the module doc)
QUANTISABLE = LINEARS + ("output",)  # what ``quantize_spec`` can quantise: a layer's linear layers, the output layer


def is_int8(linear: Linear | None) -> bool:
    """Whether a spec ``Linear`` holds int8 weights (with their per-row ``scale``)."""
    return linear is not None and linear.weight.dtype == torch.int8


def _scales(amax: Tensor, top: int) -> Tensor:
    """max |row| -> the scale mapping it to ``top``; 1 for a zero row (its integers are all 0)."""
    return torch.where(amax > 0, amax / top, torch.ones_like(amax))


def quantize_weight(weight: Tensor) -> tuple[Tensor, Tensor]:
    """W (N, K) float -> (q int8 (N, K), scale float32 (N,)), W ~= q * scale[:, None], |q| <= 127, symmetric per
    output channel; |W - q * scale| <= scale / 2 elementwise. A zero row has scale 1 and q 0."""
    w = weight.detach().float()
    scale = _scales(w.abs().amax(1), WEIGHT_MAX)  # (N,)
    q = torch.round(w / scale[:, None]).clamp_(-WEIGHT_MAX, WEIGHT_MAX).to(torch.int8)
    return q, scale


def quantize_rows(x: Tensor, act_max: int = ACT_MAX, skip: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """x (M, K) float -> (a (M, K) float32 holding integers in [-act_max, act_max], s (M, 1), c (M, 1) float32),
    each row over its range (the module doc): x ~= a s + c. ``skip`` (k,) channel indices left out of the ranges,
    where a is 0 (the outliers). A row of one value gives a = 0, s = 0; a row with NaN or inf gives c or s NaN or
    inf (its outputs are NaN, as the float product's would be)."""
    x = x.float()
    hi, lo = x, x
    if skip is not None and skip.numel():
        hi, lo = x.index_fill(1, skip, -math.inf), x.index_fill(1, skip, math.inf)
    hi, lo = hi.amax(1, keepdim=True), lo.amin(1, keepdim=True)  # (M, 1); NaN where the row has NaN
    none = hi == -math.inf  # every channel skipped: a = 0, c = 0
    hi, lo = hi.masked_fill(none, 0.0), lo.masked_fill(none, 0.0)
    c, h = (hi + lo) * 0.5, (hi - lo) * 0.5
    # (x - c) act_max / h: NaN where h is 0 (0 * inf), NaN or inf: such rows quantise to 0
    a = ((x - c) * (act_max / h)).round_().clamp_(-act_max, act_max).nan_to_num_(0.0)
    if skip is not None and skip.numel():
        a.index_fill_(1, skip, 0.0)
    return a, h / act_max, c


def outliers(in_features: int) -> int:
    """How many input channels a call keeps in float32: 8, at most in_features / 8."""
    return min(OUTLIERS, in_features // 8)


def outlier_channels(x: Tensor, k: int) -> Tensor:
    """x (M, K) -> the k channels (k,) of largest |x| over the rows (NaN first), none where there are no rows."""
    if k == 0 or x.shape[0] == 0:
        return torch.zeros(0, dtype=torch.long)
    return x.float().abs().amax(0).topk(k).indices


def outlier_product(out: Tensor, x: Tensor, c: Tensor, idx: Tensor, q_t: Tensor, scale: Tensor) -> Tensor:
    """out (M, N) += the outlier channels' share of the product, (x[:, idx] - c) (M, k) float32 times the
    dequantised weight columns, from q_t = q^T (K, N) int8: q_t[idx] * scale (k, N). Returns ``out``."""
    return out.addmm_(x.float()[:, idx] - c, q_t[idx].float().mul_(scale))


def dequantize(q: Tensor, scale: Tensor) -> Tensor:
    """q (N, K) int8, scale (N,) -> q * scale[:, None] float32 (N, K)."""
    return q.float() * scale[:, None]


def int8_product_reference(a: Tensor, q: Tensor) -> Tensor:
    """The exact integer sums sum_k a[i, k] q[j, k]: a (M, K) integers (any dtype), q (N, K) int8 -> (M, N)
    float64 (|sum| < 2^53: exact, as int32 accumulation gives for |sum| < 2^31)."""
    return F.linear(a.double(), q.double())


def int8_linear_reference(x: Tensor, linear: Linear, act_max: int = ACT_MAX, k: int | None = None) -> Tensor:
    """x (M, K) -> y (M, N) float32 through the exact integer sums (see the module doc; ``k`` outlier channels,
    default ``outliers(K)``), the epilogue in float64."""
    idx = outlier_channels(x, outliers(x.shape[1]) if k is None else k)
    a, s, c = quantize_rows(x, act_max, idx)
    q, scale = linear.weight.double(), linear.scale.double()
    y = int8_product_reference(a, linear.weight) * s.double()  # (M, N)
    y = y + F.linear(x.double()[:, idx] - c.double(), q[:, idx]) + c.double() * q.sum(1)
    y = y * scale
    return (y if linear.bias is None else y + linear.bias.double()).float()


def quantize_linear(linear: Linear | None) -> Linear | None:
    """A float spec ``Linear`` -> the same in int8 (weight int8, ``scale`` (N,), bias float32)."""
    if linear is None or is_int8(linear):
        return linear
    q, scale = quantize_weight(linear.weight)
    return Linear(q, None if linear.bias is None else linear.bias.detach().float(), scale)


def cat_rows(linears: list[Linear]) -> Linear:
    """Linear layers of the same inputs stacked by rows (one product for all: e.g. every layer's cross-attention
    keys and values), int8 scales included."""
    bias = None if linears[0].bias is None else torch.cat([m.bias for m in linears])
    scale = torch.cat([m.scale for m in linears]) if all(is_int8(m) for m in linears) else None
    return Linear(torch.cat([m.weight for m in linears]), bias, scale)


def _layer(layer: Layer, keep: tuple[str, ...]) -> Layer:
    def q(linear: Linear, name: str) -> Linear:
        return linear if name in keep else quantize_linear(linear)

    cross = layer.cross
    if cross is not None:
        cross = CrossAttention(q(cross.qkv, "cross_qkv"), q(cross.out, "cross_out"), cross.norm)
    return dataclasses.replace(layer, qkv=q(layer.qkv, "qkv"), self_out=q(layer.self_out, "self_out"),
                               ff1=q(layer.ff1, "ff1"), ff2=q(layer.ff2, "ff2"), cross=cross)


def _stack(stack: Stack | None, keep: tuple[str, ...]) -> Stack | None:
    return None if stack is None else dataclasses.replace(stack, layers=tuple(_layer(m, keep) for m in stack.layers))


def quantize_spec(spec: ModelSpec, keep: tuple[str, ...] = FLOAT_LINEARS) -> ModelSpec:
    """``spec`` (float32) with each layer's linear layers and the output layer in int8 but those named in ``keep``
    (``QUANTISABLE``' names: ``spec.LINEARS``' and "output"; default ``FLOAT_LINEARS``); the rest unchanged (see
    the module doc)."""
    dtype = spec.encoder.layers[0].qkv.weight.dtype if spec.encoder.layers else torch.float32
    if dtype != torch.float32:
        raise ValueError(f"quantize_spec: needs a float32 spec, got {dtype}")
    unknown = sorted(set(keep) - set(QUANTISABLE))
    if unknown:
        raise ValueError(f"quantize_spec: `keep` names {unknown}, not linear layers "
                         f"(choices: {', '.join(QUANTISABLE)})")
    output = spec.output if "output" in keep else quantize_linear(spec.output)
    return dataclasses.replace(spec, encoder=_stack(spec.encoder, keep), decoder=_stack(spec.decoder, keep),
                               output=output)
