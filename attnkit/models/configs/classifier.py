"""``ClassifierConfig``: the sequence classifier"s settings (``attnkit.models.classifier`` builds the model)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from ...nn import TransformerConfig

__all__ = ["ClassifierConfig"]


def _default_encoder() -> TransformerConfig:
    return TransformerConfig(d_model=128, num_heads=4, d_ff=256, num_encoder_layers=2, dropout=0.2,
                             norm_first=True, positional="rope")


@dataclass(frozen=True)
class ClassifierConfig:
    """``attention``: a variant of ``attnkit.nn.VARIANTS`` ("full", "local", "performer", ...) with its
    ``attention_options`` (defaults resolved against ``encoder.max_len``)."""

    vocab_size: int = field(metadata={"help": "token vocabulary size, including padding (0) and unknown (1)"})
    num_classes: int = field(metadata={"help": "number of labels"})
    pooling: Literal["mean", "max", "meanmax", "first"] = field(default="meanmax", metadata={
        "help": "how the token vectors become one sentence vector: their mean, their max, both concatenated, "
                "or the first position's vector (LRA's CLS pooling)"})
    encoder: TransformerConfig = field(default_factory=_default_encoder, metadata={"help": "the Transformer encoder"})
    attention: str = field(default="full", metadata={
        "help": "the self-attention variant (attnkit.nn.VARIANTS: full, local, longformer, sparse, linear, performer, "
                "linformer, nystrom)"})
    attention_options: dict = field(default_factory=dict, metadata={"help": "options of the attention variant"})

    def __post_init__(self):
        for name in ("vocab_size", "num_classes"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"ClassifierConfig: `{name}` must be a positive integer, got {v!r}")
        if self.pooling not in ("mean", "max", "meanmax", "first"):
            raise ValueError(f"ClassifierConfig: `pooling` must be mean, max, meanmax or first, got {self.pooling!r}")
        from ...nn.variants import variant_options  # the variants' modules (torch): only when a config is made

        variant_options(self.attention, self.encoder.max_len, self.attention_options)  # raises on a bad one

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ClassifierConfig:
        d = dict(d)
        d["encoder"] = TransformerConfig.from_dict(d["encoder"])
        return cls(**d)
