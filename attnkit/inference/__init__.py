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
``engine_for(model, dtype=...)`` is the one place that picks the engine and its dtype (``dtypes.py``: the one table
of dtypes by name). Each name is imported from its module on first use, so ``attnkit.inference.dtypes`` is read
by the command line without importing torch.
"""

from ..lazy import lazy_names

_WHERE = {
    "architectures": ("ARCHITECTURES", "Architecture", "Unsupported", "model_state", "spec_of", "spec_tensors"),
    "asr": ("AsrEngine",),
    "dtypes": ("DTYPES", "DType"),
    "encoder": ("BertEngine", "EncoderStack"),
    "layer": ("PackedLayer",),
    "nat": ("NATEngine",),
    "packed": ("LAYER_ROWS", "PANEL_ROWS", "SMALL_ROWS", "PackedLinear", "onednn_available"),
    "select": ("engine_for", "refusal"),
    "seq2seq": ("Seq2SeqEngine", "StepCache"),
    "spec": ("Layer", "Linear", "ModelSpec", "Norm", "Positions", "Settings", "Stack"),
}
__getattr__, __all__ = lazy_names(__name__, _WHERE)
