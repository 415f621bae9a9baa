"""Layer 2: modules that own parameters.

Each name is imported from its module on first use, so ``attnkit.nn.limits`` and ``attnkit.nn.config`` (what
the command line's options are made of) are read without importing torch."""

from ..lazy import lazy_names

_WHERE = {
    "attention": ("MultiHeadAttention", "KVCache", "AttentionOutput"),
    "blocks": ("FeedForward", "EncoderLayer", "DecoderLayer", "LayerCache"),
    "config": ("TransformerConfig", "PRESETS", "preset"),
    "efficient": ("StructuredAttention", "LinformerAttention", "NystromAttention", "PerformerAttention"),
    "positional": ("Sinusoidal", "LearnedAbsolute", "Rotary", "ALiBi", "RelativePosition"),
    "transformer": ("Encoder", "Decoder", "Transformer", "EncoderOutput", "DecoderOutput"),
    "variants": ("VARIANTS", "build_attention", "attention_factory"),
}
__getattr__, __all__ = lazy_names(__name__, _WHERE)
