"""One choice of engine: ``engine_for(model, dtype=...)`` for trained runs, NAT runs, Marian folders and BERT folders
alike.

The engine comes from the model's architecture (``architectures.ARCHITECTURES``): ``Seq2SeqEngine`` for a
``Seq2SeqModel``, ``NATEngine`` for a ``NATModel``, ``BertEngine`` for a ``BertModel``, ``AsrEngine`` (the encoder
and CTC head) for an ``AsrModel``, each built from the model's weight spec. Where no engine can run the model (an
architecture without a spec table, positions inside attention, no biases, a dtype the engines do not take, no
oneDNN), ``engine_for`` returns the model itself (in ``dtype``) and says why on the ``attnkit`` logger (INFO);
``refusal(model, dtype)`` gives that reason.
"""

from __future__ import annotations

import copy
import logging

import torch

from ..models.asr import AsrModel
from ..models.bert import BertModel
from ..models.nat import NATModel
from .architectures import Unsupported, architecture_of, spec_of
from .asr import AsrEngine
from .encoder import BertEngine
from .nat import NATEngine
from .packed import onednn_available
from .quant import quantize_spec
from .quant_linear import float_linears
from .seq2seq import Seq2SeqEngine

__all__ = ["engine_for", "refusal", "ENGINES"]

log = logging.getLogger("attnkit")
ENGINES = {"seq2seq": Seq2SeqEngine, "nat": NATEngine, "bert": BertEngine, "asr": AsrEngine}
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int8)  # torch.int8: int8 weights (``quant.py``)


def _dtype_of(model) -> torch.dtype:
    return next(model.parameters()).dtype


def refusal(model, dtype: torch.dtype | None = None) -> str | None:
    """Why no engine runs ``model`` in ``dtype`` (default: its own), or None."""
    try:
        architecture_of(model)
    except Unsupported as e:
        return str(e)
    dtype = dtype or _dtype_of(model)
    if dtype not in DTYPES:
        return f"dtype {dtype}: the engines run {', '.join(str(d) for d in DTYPES)}"
    if not onednn_available():
        return "torch's oneDNN linear ops are not available here"
    return None


def engine_for(model, *, dtype: torch.dtype | None = None):
    """The inference engine of ``model`` in ``dtype`` (default: the model's own), or the model itself in that dtype
    where none runs it (see the module doc). The model is not changed; the engine copies its weights."""
    model.eval()
    int8 = dtype == torch.int8  # int8 weights quantised from the float32 model's spec; the reference stays float32
    weights = torch.float32 if int8 else dtype  # the reference modules' dtype (None: the model's)
    same = weights is None or weights == _dtype_of(model)
    why = refusal(model, dtype)
    if why is not None:
        if int8:
            log.warning("attnkit: %s runs in float32 on its reference modules, not int8: %s", type(model).__name__, why)
        else:
            log.info("attnkit: %s runs on its reference modules: %s", type(model).__name__, why)
        return model if same else copy.deepcopy(model).to(weights).eval()
    if isinstance(model, BertModel):
        spec = spec_of(model, weights)
        return BertEngine(quantize_spec(spec, float_linears()) if int8 else spec)
    arch = architecture_of(model).name
    reference = model if same else copy.deepcopy(model).to(weights).eval()
    spec = spec_of(reference)
    engine = NATEngine if isinstance(model, NATModel) else AsrEngine if isinstance(model, AsrModel) else Seq2SeqEngine
    assert ENGINES[arch] is engine
    return engine(quantize_spec(spec, float_linears()) if int8 else spec, reference)
