"""Sequence classification: one label per sequence (sentiment, speaker).

Token embeddings -> Transformer encoder (``attnkit.nn.Encoder``) -> pooled over the real tokens
(``mean``, ``max``, or both concatenated: ``meanmax``) -> dropout -> linear scores per class.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn

from .. import masks
from ..functional.pooling import masked_max, masked_mean
from ..nn import Encoder, TransformerConfig
from ..nn.variants import attention_factory, variant_options

__all__ = ["ClassifierConfig", "SequenceClassifier", "pool"]


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
        variant_options(self.attention, self.encoder.max_len, self.attention_options)  # raises on a bad one

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ClassifierConfig:
        d = dict(d)
        d["encoder"] = TransformerConfig.from_dict(d["encoder"])
        return cls(**d)


def pool(h: Tensor, lengths: Tensor, how: str) -> Tensor:
    """h (B, L, d), lengths (B,) -> (B, d) or (B, 2d) for ``meanmax``; padding positions ignored.
    ``first``: the first position's vector (LRA's "CLS" pooling; no token is added)."""
    if how == "first":
        return h[:, 0]
    if how == "mean":
        return masked_mean(h, lengths)
    mx = masked_max(h, lengths)
    return mx if how == "max" else torch.cat((masked_mean(h, lengths), mx), dim=-1)


class SequenceClassifier(nn.Module):
    """tokens (B, L), lengths (B,) -> class scores (B, num_classes)."""

    def __init__(self, config: ClassifierConfig):
        super().__init__()
        self.config = config
        d = config.encoder.d_model
        self.embed = nn.Embedding(config.vocab_size, d, padding_idx=0)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        attn = None if config.attention == "full" else attention_factory(config.attention, config.attention_options)
        self.encoder = Encoder(config.encoder, attention=attn)
        self.dropout = nn.Dropout(config.encoder.dropout)
        self.out = nn.Linear(2 * d if config.pooling == "meanmax" else d, config.num_classes)

    def forward(self, tokens: Tensor, lengths: Tensor, *, need_weights: bool = False):
        if tokens.dim() != 2 or lengths.shape != tokens.shape[:1]:
            raise ValueError(f"SequenceClassifier: `tokens` (B, L) and `lengths` (B,) expected, got "
                             f"{tuple(tokens.shape)} and {tuple(lengths.shape)}")
        x = self.embed(tokens) * self.config.encoder.d_model ** 0.5  # (B, L, d)
        out = self.encoder(x, masks.padding(lengths), need_weights=need_weights)
        scores = self.out(self.dropout(pool(out.last_hidden_state, lengths, self.config.pooling)))
        return (scores, out.attentions) if need_weights else scores


class PretrainedClassifier(nn.Module):
    """A pretrained BERT-family encoder (e.g. MiniLM from ``attnkit.load_pretrained``), mean-pooled,
    then dropout and a linear layer: fine-tuned end to end. ids (B, L), lengths (B,) -> (B, classes)."""

    def __init__(self, bert: nn.Module, num_classes: int, dropout: float = 0.1):
        super().__init__()
        self.bert = bert
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(bert.config.hidden_size, num_classes)

    def forward(self, tokens: Tensor, lengths: Tensor, *, need_weights: bool = False):
        out = self.bert(tokens, lengths=lengths, need_weights=need_weights)
        scores = self.out(self.dropout(pool(out.last_hidden_state, lengths, "mean")))
        return (scores, out.attentions) if need_weights else scores
