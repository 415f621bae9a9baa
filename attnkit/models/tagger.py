"""Sequence labelling: one label per vector (part-of-speech tagging, "I saw a saw").

Each word becomes one vector: a word embedding (lower-cased form) concatenated with character
features (a character CNN with max-pooling over the word's characters, which sees case, suffixes
and digits, so unknown words still get a good vector). A Transformer encoder (``attnkit.nn.Encoder``)
lets every word attend to the sentence; a linear layer scores the tags of every position.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn

from .. import masks
from ..nn import Encoder, TransformerConfig

__all__ = ["TaggerConfig", "Tagger"]


def _default_encoder() -> TransformerConfig:
    return TransformerConfig(d_model=128, num_heads=4, d_ff=256, num_encoder_layers=2, dropout=0.2,
                             norm_first=True, positional="rope")


@dataclass(frozen=True)
class TaggerConfig:
    """Sizes. ``vocab_size`` / ``char_vocab_size`` include the padding (0) and unknown (1) entries."""

    vocab_size: int = field(metadata={"help": "word vocabulary size, including padding (0) and unknown (1)"})
    char_vocab_size: int = field(metadata={"help": "character vocabulary size, including padding (0) and unknown (1)"})
    num_tags: int = field(metadata={"help": "number of tags"})
    word_dim: int = field(default=100, metadata={"help": "word embedding size (0 = characters only)"})
    char_dim: int = field(default=32, metadata={"help": "character embedding size"})
    char_channels: int = field(default=64, metadata={"help": "output channels of the character CNN"})
    char_kernel: int = field(default=3, metadata={"help": "width of the character CNN's kernel"})
    encoder: TransformerConfig = field(default_factory=_default_encoder, metadata={"help": "the Transformer encoder"})

    def __post_init__(self):
        for name in ("vocab_size", "char_vocab_size", "num_tags", "char_dim", "char_channels", "char_kernel"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"TaggerConfig: `{name}` must be a positive integer, got {v!r}")
        if not isinstance(self.word_dim, int) or self.word_dim < 0:
            raise ValueError(f"TaggerConfig: `word_dim` must be an integer >= 0, got {self.word_dim!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TaggerConfig:
        d = dict(d)
        d["encoder"] = TransformerConfig.from_dict(d["encoder"])
        return cls(**d)


class CharCNN(nn.Module):
    """(B, L, C) character ids (0 = padding) -> (B, L, channels): convolution, max over characters."""

    def __init__(self, vocab: int, dim: int, channels: int, kernel: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.conv = nn.Conv1d(dim, channels, kernel, padding=kernel // 2)

    def forward(self, chars: Tensor) -> Tensor:
        b, l, c = chars.shape
        x = self.embed(chars.reshape(b * l, c)).transpose(1, 2)  # (B L, dim, C)
        h = torch.relu(self.conv(x))  # (B L, channels, C)
        h = h.masked_fill((chars.reshape(b * l, 1, c) == 0), 0.0)  # ReLU >= 0, so 0 never wins over a real char
        return h.max(dim=-1).values.reshape(b, l, -1)  # (B, L, channels)


class Tagger(nn.Module):
    """words (B, L), chars (B, L, C), lengths (B,) -> tag scores (B, L, num_tags)."""

    def __init__(self, config: TaggerConfig):
        super().__init__()
        self.config = config
        d = config.encoder.d_model
        self.words = nn.Embedding(config.vocab_size, config.word_dim, padding_idx=0) if config.word_dim else None
        self.chars = CharCNN(config.char_vocab_size, config.char_dim, config.char_channels, config.char_kernel)
        self.proj = nn.Linear(config.word_dim + config.char_channels, d)
        self.encoder = Encoder(config.encoder)
        self.out = nn.Linear(d, config.num_tags)

    def forward(self, words: Tensor, chars: Tensor, lengths: Tensor, *, need_weights: bool = False):
        """Returns scores (B, L, T), or (scores, attentions per layer (B, H, L, L)) with ``need_weights``."""
        if words.dim() != 2 or chars.dim() != 3 or chars.shape[:2] != words.shape:
            raise ValueError(f"Tagger: `words` (B, L) and `chars` (B, L, C) expected, got {tuple(words.shape)} "
                             f"and {tuple(chars.shape)}")
        feats = [self.chars(chars)]
        if self.words is not None:
            feats.insert(0, self.words(words))
        x = self.proj(torch.cat(feats, dim=-1))  # (B, L, d)
        out = self.encoder(x, masks.padding(lengths), need_weights=need_weights)
        scores = self.out(out.last_hidden_state)
        return (scores, out.attentions) if need_weights else scores


class PretrainedTagger(nn.Module):
    """A pretrained BERT-family encoder (e.g. MiniLM) + a linear layer on every subword; trained with
    first-subword labelling (the other subwords of a word are not scored). ids (B, S), lengths (B,)."""

    def __init__(self, bert: nn.Module, num_tags: int, dropout: float = 0.1):
        super().__init__()
        self.bert = bert
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(bert.config.hidden_size, num_tags)

    def forward(self, ids: Tensor, lengths: Tensor, *, need_weights: bool = False):
        out = self.bert(ids, lengths=lengths, need_weights=need_weights)
        scores = self.out(self.dropout(out.last_hidden_state))  # (B, S, T)
        return (scores, out.attentions) if need_weights else scores
