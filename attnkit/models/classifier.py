"""Sequence classification: one label per sequence (sentiment, speaker).

Token embeddings -> Transformer encoder (``attnkit.nn.Encoder``) -> pooled over the real tokens
(``mean``, ``max``, or both concatenated: ``meanmax``) -> dropout -> linear scores per class.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .. import masks
from ..functional.pooling import masked_max, masked_mean
from ..nn import Encoder
from ..nn.variants import attention_factory
from .configs.classifier import ClassifierConfig

__all__ = ["ClassifierConfig", "SequenceClassifier", "pool"]


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
