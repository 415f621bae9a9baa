"""A NAT engine's first pass as one native call: ``NatFirstPass`` built from the engine's packed weights by name.

Each argument is a named field the native side checks once, when the pass is made (``nat_first_pass.h``):
the encoder's and the decoder's ``LayerStack``, the source table (times sqrt(d)), the encoder's input positions,
the decoder's input of mask tokens, the final norms, and the length classifier (a CTC model: its row's ratio
instead), every layer's cross K, V projection and the output layer as ``PackedRows``.
"""

from __future__ import annotations

from ..functional.dispatch import SHORT_MAX_LEN
from . import native
from .packed import LAYER_ROWS

__all__ = ["native_first_pass"]


def _settings(layer) -> tuple:
    return layer.num_heads, layer.norm_first, layer.ff1._act_id, layer.norms[0].eps


def native_first_pass(engine):
    """``engine``'s first pass in one native call, or None where not every part runs natively: the encoder's and
    the decoder's layers each in one stack of the same settings, affine final norms of one eps, the linear layers
    in the small kernel, positions for a whole row of the native layers."""
    base = engine.base
    enc, ext = base.encoder, native.compositions()
    if (ext is None or engine.stack_kernel is None or enc.stack_kernel is None
            or (engine.length is None and engine.ctc_row is None) or not enc.all_native):
        return None
    norms = [n for n in (enc.norm, base.final_norm) if n is not None]
    linears = (base.cross_kv, base.output) + (() if engine.length is None else (engine.length,))
    if (_settings(enc.layers[0]) != _settings(base.layers[0]) or any(not n.affine for n in norms)
            or len({n.eps for n in norms}) > 1 or any(lin.small is None for lin in linears)):
        return None
    rows = min(LAYER_ROWS, SHORT_MAX_LEN)  # the longest source and row the pass takes
    positions = base.target_table.new_empty(0)
    if enc.positions.kind != "none":
        n = max(engine.config.max_positions, 1)
        table = enc.positions.table
        positions = (enc.positions.rows(0, n) if enc.positions.kind == "sinusoidal" else table[:n]).to(
            base.src_table.dtype).contiguous()
        if positions.shape[0] < rows:
            return None  # fewer positions than a row of the native layers: the Python pass

    def pair(norm):
        return None if norm is None else (norm.weight, norm.bias)

    return ext.NatFirstPass(encoder=enc.stack, decoder=engine.stack, src_table=base.src_table.contiguous(),
                            positions=positions, mask_rows=engine.masked_rows(engine.config.max_target_length)
                            .contiguous(), encoder_norm=pair(enc.norm), decoder_norm=pair(base.final_norm),
                            norm_eps=norms[0].eps if norms else 1e-5, length=None if engine.length is None else
                            native.packed_rows(engine.length), length_offset=engine.config.max_length_offset,
                            ctc_row=engine.ctc_row,
                            cross_kv=native.packed_rows(base.cross_kv), output=native.packed_rows(base.output),
                            max_rows=rows, max_row=engine.max_first_row)
