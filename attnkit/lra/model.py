"""LRA-lite's models: one ``SequenceClassifier`` per cell (``build_model``: only the attention differs
between variants), read per position by ``PerPosition`` where a task scores tokens (MQAR's answers,
the masked pixels of self-pretraining)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from .. import masks
from ..models.classifier import ClassifierConfig, SequenceClassifier
from ..nn import TransformerConfig
from .settings import TaskSettings

__all__ = ["build_model", "PerPosition", "encode"]


def build_model(s: TaskSettings, variant: str, vocab_size: int, num_classes: int) -> SequenceClassifier:
    """Token embedding + learned positions -> pre-LN encoder with the variant's attention -> pooling -> linear."""
    enc = TransformerConfig(d_model=s.d_model, num_heads=s.num_heads, d_ff=s.d_ff, num_encoder_layers=s.num_layers,
                            num_decoder_layers=0, dropout=s.dropout, activation="gelu", norm_first=True,
                            positional="learned", max_len=s.seq_len)
    cfg = ClassifierConfig(vocab_size, num_classes, pooling=s.pooling, encoder=enc, attention=variant,
                           attention_options=s.options_for(variant))
    return SequenceClassifier(cfg)


def encode(body: SequenceClassifier, tokens: Tensor, lengths: Tensor, extra: Tensor | None = None) -> Tensor:
    """tokens (B, L), lengths (B,) -> the encoder's last hidden states (B, L, d), as ``body`` computes them
    (``extra`` (B, L, d) is added to the token embeddings)."""
    x = body.embed(tokens) if extra is None else body.embed(tokens) + extra
    x = x * body.config.encoder.d_model ** 0.5  # (B, L, d)
    return body.encoder(x, masks.padding(lengths)).last_hidden_state


class PerPosition(nn.Module):
    """``body``'s embedding and encoder, then ``head`` (default: ``body.out``) at every position:
    tokens (B, L), lengths (B,) -> scores (B, L, C). The body's modules are shared, not copied, so
    what this trains (self-pretraining) stays in the body."""

    def __init__(self, body: SequenceClassifier, head: nn.Module | None = None, *, shift: bool = False):
        super().__init__()
        d = body.config.encoder.d_model
        self.previous = None
        if shift:
            self.previous = nn.Embedding(body.config.vocab_size, d, padding_idx=0)
            nn.init.normal_(self.previous.weight, std=d ** -0.5)
        if head is None and body.config.pooling == "meanmax":
            raise ValueError("PerPosition: a body with meanmax pooling has a (2d -> C) output; give a `head`")
        self.body, self.head, self.config = body, head, body.config  # head None: body.out (not held twice)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        head = self.body.out if self.head is None else self.head
        extra = None
        if self.previous is not None:  # each position also sees its predecessor's token (a width-2 token shift)
            extra = self.previous(F.pad(tokens[:, :-1], (1, 0)))  # (B, L, d)
        return head(self.body.dropout(encode(self.body, tokens, lengths, extra)))
