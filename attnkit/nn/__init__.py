"""Layer 2: modules that own parameters."""

from .attention import AttentionOutput, KVCache, MultiHeadAttention
from .blocks import DecoderLayer, EncoderLayer, FeedForward, LayerCache
from .config import PRESETS, TransformerConfig, preset
from .efficient import LinformerAttention, NystromAttention, PerformerAttention, StructuredAttention
from .positional import ALiBi, LearnedAbsolute, RelativePosition, Rotary, Sinusoidal
from .transformer import Decoder, DecoderOutput, Encoder, EncoderOutput, Transformer
from .variants import VARIANTS, attention_factory, build_attention

__all__ = [
    "MultiHeadAttention", "KVCache", "AttentionOutput", "FeedForward", "EncoderLayer", "DecoderLayer",
    "LayerCache", "Encoder", "Decoder", "Transformer", "EncoderOutput", "DecoderOutput",
    "TransformerConfig", "PRESETS", "preset", "Sinusoidal", "LearnedAbsolute", "Rotary", "ALiBi",
    "RelativePosition", "StructuredAttention", "LinformerAttention", "NystromAttention", "PerformerAttention",
    "VARIANTS", "build_attention", "attention_factory",
]
