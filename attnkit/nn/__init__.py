"""Layer 2: modules that own parameters."""

from .attention import AttentionOutput, KVCache, MultiHeadAttention
from .blocks import DecoderLayer, EncoderLayer, FeedForward, LayerCache
from .config import PRESETS, TransformerConfig, preset
from .positional import ALiBi, LearnedAbsolute, RelativePosition, Rotary, Sinusoidal
from .transformer import Decoder, DecoderOutput, Encoder, EncoderOutput, Transformer

__all__ = [
    "MultiHeadAttention", "KVCache", "AttentionOutput", "FeedForward", "EncoderLayer", "DecoderLayer",
    "LayerCache", "Encoder", "Decoder", "Transformer", "EncoderOutput", "DecoderOutput",
    "TransformerConfig", "PRESETS", "preset", "Sinusoidal", "LearnedAbsolute", "Rotary", "ALiBi",
    "RelativePosition",
]
