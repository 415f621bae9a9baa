"""One choice of engine: ``engine_for(model, dtype=...)`` for trained runs, NAT runs, Marian folders and BERT folders
alike.

The engine comes from the model's architecture (``architectures.ARCHITECTURES``): ``Seq2SeqEngine`` for a
``Seq2SeqModel``, ``NATEngine`` for a ``NATModel``, ``BertEngine`` for a ``BertModel``, ``AsrEngine`` (the encoder
and CTC head) for an ``AsrModel``, each built from the model's weight spec. Where no engine can run the model (an
architecture without a spec table, positions inside attention, no biases, a dtype no engine runs: float64, the
dtype table's ``why_not``; no oneDNN), ``engine_for`` returns the model itself (in ``dtype``) and says why on the
``attnkit`` logger (INFO); ``refusal(model, dtype)`` gives that reason. ``dtype`` is read through the one table of
dtypes (``dtypes.py``): a name, its torch dtype or its row.
"""

from __future__ import annotations

import logging

import torch

from .architectures import Unsupported, architecture_of, dtype_of, reference_in, spec_of
from .asr import AsrEngine
from .dtypes import DTYPES, DType, of_torch, resolve
from .encoder import BertEngine
from .nat import NATEngine
from .packed import onednn_available
from .quant import quantize_spec
from .quant_linear import float_linears
from .seq2seq import Seq2SeqEngine

__all__ = ["engine_for", "refusal", "ENGINES"]

log = logging.getLogger("attnkit")
ENGINES = {"seq2seq": Seq2SeqEngine, "nat": NATEngine, "bert": BertEngine, "asr": AsrEngine}


def _row(model, dtype) -> DType | None:
    """The table's row of ``dtype`` (checked: a ValueError naming ``engine_for``'s ``dtype=``), else of the model's
    own dtype (None where the table has none)."""
    return resolve(dtype, "engine_for") if dtype is not None else of_torch(dtype_of(model))


def refusal(model, dtype: DType | torch.dtype | str | None = None) -> str | None:
    """Why no engine runs ``model`` in ``dtype`` (default: its own), or None."""
    try:
        arch = architecture_of(model)
    except Unsupported as e:
        return str(e)
    row = _row(model, dtype)
    if row is None:
        return f"dtype {dtype_of(model)}: not in the table of dtypes ({', '.join(DTYPES)})"
    if arch.name not in row.engines:
        return row.why_not
    if not onednn_available():
        return "torch's oneDNN linear ops are not available here"
    return None


def engine_for(model, *, dtype: DType | torch.dtype | str | None = None):
    """The inference engine of ``model`` in ``dtype`` (default: the model's own; a name of ``dtypes.DTYPES``, its
    torch dtype or its row), or the model itself in that dtype where none runs it (see the module doc). The model
    is not changed; the engine copies its weights. int8: int8 weights quantised from the float32 model's spec, the
    reference staying float32."""
    row = _row(model, dtype)
    weights = None if row is None else row.weights  # the reference modules' dtype
    why = refusal(model, row)
    if why is not None:
        if row is not None and row.quantized:
            log.warning("attnkit: %s runs in %s on its reference modules, not %s: %s", type(model).__name__,
                        row.loads, row.name, why)
        else:
            log.info("attnkit: %s runs on its reference modules: %s", type(model).__name__, why)
        return reference_in(model, weights)
    arch = architecture_of(model).name
    if arch == "bert":  # an encoder keeps no reference: its spec's tensors in the weights' dtype
        spec = spec_of(reference_in(model, None), weights)
        return BertEngine(quantize_spec(spec, float_linears()) if row.quantized else spec)
    reference = reference_in(model, weights)
    spec = spec_of(reference)
    return ENGINES[arch](quantize_spec(spec, float_linears()) if row.quantized else spec, reference)
