"""The inference layer: fast engines for trained models, read from each model's weight spec.

Between the models and the applications (imports run ``pretrained``, ``tasks`` -> ``inference`` -> ``models``): an
engine knows a model only through its weight spec (``spec.py``: named tensors plus the settings an engine needs:
norm placement, activation, positions, heads, tied tables), which each architecture maps from its own tensor names
in one table (``architectures.py``). The engines: ``BertEngine`` (BERT-family encoders: MiniLM folders),
``Seq2SeqEngine`` (autoregressive encoder-decoders: trained runs, Marian folders; ``generation.generate`` runs it),
``NATEngine`` (non-autoregressive ones: ``generation.mask_predict`` runs it) and ``AsrEngine`` (a speech
recogniser's encoder and CTC head), all made of one packed layer program (``layer.py``) over ``PackedLinear``
(``packed.py``) and, where a compiler builds them (any CPU), of the native compositions of ``inference/native``
(whole layers, a decoding step, a NAT first pass in one call), each tested against that program.
``engine_for(model, dtype=...)`` is the one place that picks the engine.
"""

from .architectures import ARCHITECTURES, Architecture, Unsupported, model_state, spec_of, spec_tensors
from .asr import AsrEngine
from .encoder import BertEngine, EncoderStack
from .layer import PackedLayer
from .nat import NATEngine
from .packed import LAYER_ROWS, PANEL_ROWS, SMALL_ROWS, PackedLinear, onednn_available
from .select import engine_for, refusal
from .seq2seq import Seq2SeqEngine, StepCache
from .spec import Layer, Linear, ModelSpec, Norm, Positions, Settings, Stack

__all__ = ["engine_for", "refusal", "spec_of", "spec_tensors", "model_state", "ARCHITECTURES", "Architecture",
           "Unsupported", "ModelSpec", "Settings", "Stack", "Layer", "Linear", "Norm", "Positions", "PackedLinear",
           "PackedLayer", "EncoderStack", "BertEngine", "Seq2SeqEngine", "NATEngine", "AsrEngine", "StepCache",
           "LAYER_ROWS", "PANEL_ROWS", "SMALL_ROWS", "onednn_available"]
