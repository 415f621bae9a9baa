"""The inference layer's native compositions: whole layers, a decoding step and a NAT first pass in one call.

The C++ (``csrc/``): ``layer_weights.h`` (a layer's weights as a struct with named fields, checked once when it
is made), ``layer_forward.h`` (an encoder or non-autoregressive decoder layer over a few short rows, one OpenMP
region; ``layers_forward`` a stack of them), ``decoder_step.h`` (a decoder layer for one new position of every
row, the K/V cache written in place) and ``nat_first_pass.h`` (a NAT model's first pass over one sentence, encoder
to best tokens), bound in ``compositions.cpp``. They are made of the kernels' checked entry points
(``attnkit/functional/native/csrc``) and built with them as one extension of their own (``native.extension``).
The packed layer program (``inference/layer.py``) is their reference: each is tested against it.

Everything here builds their arguments from a ``PackedLayer`` (itself made from the model's weight spec), by
name: ``layer_weights`` gives a ``LayerWeights`` or None where a composition cannot take the layer (a linear
layer the small kernel does not take, no bias, outputs not in multiples of 16, a norm that is not an affine
LayerNorm, norms of different eps), and ``compositions()`` is None where the kernels do not run (no compiler).
"""

from __future__ import annotations

from pathlib import Path

from ...functional import native
from ..layer import PackedLayer
from ..packed import PackedLinear

__all__ = ["compositions", "layer_weights", "layer_stack", "packed_rows", "CSRC"]

CSRC = Path(__file__).with_name("csrc")


def compositions():
    """The compiled compositions (``attnkit_inference``), or None where the native kernels do not run here."""
    return native.extension(CSRC, "attnkit_inference")


def _pair(linear: PackedLinear, panels: bool) -> tuple:
    return (linear.panel_weight() if panels else linear.blocked_weight(), linear.bias)


def layer_weights(layer: PackedLayer, *, panels: bool):
    """``layer`` as the compositions take it (``LayerWeights``: W blocked, or in panels with ``panels``), or None
    where they cannot take it (see the module doc) or do not run here."""
    ext = compositions()
    linears = layer.linears()
    norms = layer.norms
    if ext is None or any(m.small is None or m.bias is None or m.out_features % 16 for m in linears):
        return None
    if not all(n is not None and n.affine for n in norms) or len({n.eps for n in norms}) != 1:
        return None  # (the kernels take one eps)
    cross = {}
    if layer.cross:
        cross = dict(cross_q=_pair(layer.cross_q, panels), cross_out=_pair(layer.cross_out, panels),
                     cross_norm=(norms[1].weight, norms[1].bias))
    return ext.LayerWeights(qkv=_pair(layer.qkv, panels), self_out=_pair(layer.self_out, panels),
                            ff1=_pair(layer.ff1, panels), ff2=_pair(layer.ff2, panels),
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
