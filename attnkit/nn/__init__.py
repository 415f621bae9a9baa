"""Layer 2: modules that own parameters.

Each name is imported from its module on first use, so ``attnkit.nn.limits`` and ``attnkit.nn.config`` (what
the command line's options are made of) are read without importing torch."""

_WHERE = {
    "attention": ("MultiHeadAttention", "KVCache", "AttentionOutput"),
    "blocks": ("FeedForward", "EncoderLayer", "DecoderLayer", "LayerCache"),
    "config": ("TransformerConfig", "PRESETS", "preset"),
    "efficient": ("StructuredAttention", "LinformerAttention", "NystromAttention", "PerformerAttention"),
    "positional": ("Sinusoidal", "LearnedAbsolute", "Rotary", "ALiBi", "RelativePosition"),
    "transformer": ("Encoder", "Decoder", "Transformer", "EncoderOutput", "DecoderOutput"),
    "variants": ("VARIANTS", "build_attention", "attention_factory"),
}
_MODULE = {name: module for module, names in _WHERE.items() for name in names}

__all__ = sorted(_MODULE)


def __getattr__(name):
    import importlib
    import importlib.util

    if name in _MODULE:
        return getattr(importlib.import_module(f".{_MODULE[name]}", __name__), name)
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)  # a submodule, as when this package imported them all
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
