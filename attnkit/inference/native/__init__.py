"""The inference layer's native compositions: whole layers, a decoding step and a NAT first pass in one call.

The C++ (``csrc/``): ``layer_weights.h`` (a layer's weights as a struct with named fields, checked once when it
is made), ``layer_forward.h`` (an encoder or non-autoregressive decoder layer over a few short rows, one OpenMP
region; ``layers_forward`` a stack of them; ``layer_int8.h`` its int8 linear layers' step), ``decoder_step.h`` (a
decoder layer for one new position of every row, the K/V cache written in place) and ``nat_first_pass.h`` (a NAT
model's first pass over one sentence, encoder to best tokens), bound in ``compositions.cpp``. They are made of the
kernels' checked entry points (``attnkit/functional/native/csrc``) and built with them as one extension of their
own (``native.extension``).
The packed layer program (``inference/layer.py``) is their reference: each is tested against it.

Everything here builds their arguments from a ``PackedLayer`` (itself made from the model's weight spec), by
name: ``layer_weights`` gives a ``LayerWeights`` or None where a composition cannot take the layer (a linear
layer the small kernel does not take, no bias, outputs not in multiples of 16, a norm that is not an affine
LayerNorm, norms of different eps), and ``compositions()`` is None where the kernels do not run (no compiler).
A ``QuantLayer``'s int8 linear layers go in as they are packed for attnkit's int8 kernel (``Int8Weight``), where
that kernel runs them (``QuantLinear.native_weight``).
"""

from __future__ import annotations

from pathlib import Path

from ...functional import native
from ..layer import PackedLayer
from ..packed import PackedLinear
from ..quant_linear import QuantLinear

__all__ = ["compositions", "layer_weights", "layer_stack", "packed_rows", "CSRC"]

CSRC = Path(__file__).with_name("csrc")


def compositions():
    """The compiled compositions (``attnkit_inference``), or None where the native kernels do not run here."""
    return native.extension(CSRC, "attnkit_inference")


def _pair(linear: PackedLinear | QuantLinear, panels: bool, ext):
    """A linear layer as ``LayerWeights`` takes it: (W, b), or an int8 layer's ``Int8Weight``."""
    if isinstance(linear, QuantLinear):
        return ext.Int8Weight(**linear.native_weight.fields(panels))
    return (linear.panel_weight() if panels else linear.blocked_weight(), linear.bias)


def _composes(linear: PackedLinear | QuantLinear) -> bool:
    """Whether the compositions take this linear layer: the native kernel runs it, with a bias and outputs in
    multiples of 16."""
    runs = linear.native_weight is not None if isinstance(linear, QuantLinear) else linear.small is not None
    return runs and linear.bias is not None and linear.out_features % 16 == 0


def layer_weights(layer: PackedLayer, *, panels: bool):
    """``layer`` as the compositions take it (``LayerWeights``: W blocked, or in panels with ``panels``), or None
    where they cannot take it (see the module doc) or do not run here."""
    ext = compositions()
    linears = layer.linears()
    norms = layer.norms
    if ext is None or not all(_composes(m) for m in linears):
        return None
    if not all(n is not None and n.affine for n in norms) or len({n.eps for n in norms}) != 1:
        return None  # (the kernels take one eps)
    cross = {}
    if layer.cross:
        cross = dict(cross_q=_pair(layer.cross_q, panels, ext), cross_out=_pair(layer.cross_out, panels, ext),
                     cross_norm=(norms[1].weight, norms[1].bias))
    return ext.LayerWeights(qkv=_pair(layer.qkv, panels, ext), self_out=_pair(layer.self_out, panels, ext),
                            ff1=_pair(layer.ff1, panels, ext), ff2=_pair(layer.ff2, panels, ext),
                            self_norm=(norms[0].weight, norms[0].bias), ff_norm=(norms[-1].weight, norms[-1].bias),
                            **cross, num_heads=layer.num_heads, norm_first=layer.norm_first, act=layer.ff1._act_id,
                            eps=norms[0].eps, scale=layer.head_dim ** -0.5)


def layer_stack(layers: list[PackedLayer], weights: list) -> object | None:
    """The layers as one ``LayerStack`` (``layers_forward``: one call for all of them), or None where one of them
    has no ``LayerWeights`` or they differ in their settings (activation, eps)."""
    ext = compositions()
    if ext is None or not weights or any(w is None for w in weights):
        return None
    if len({(m.ff1._act_id, m.norms[0].eps, m.norm_first, m.num_heads, m.cross) for m in layers}) != 1:
        return None
    return ext.LayerStack(weights)


def packed_rows(linear: PackedLinear):
    """A linear layer in both of the small kernel's layouts (``PackedRows``, chosen by the rows), or None."""
    ext = compositions()
    if ext is None or linear.small is None:
        return None
    return ext.PackedRows(**linear.native_layouts())
