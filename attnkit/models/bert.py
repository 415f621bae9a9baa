"""A BERT-family encoder built from attnkit's own parts.

``BertEmbeddings`` (word + position + token type, then LayerNorm) feeds an ``attnkit.nn.Encoder``
configured as BERT's post-LN stack (``positional="none"``: positions come from the embeddings),
and an optional ``BertPooler`` (dense + tanh on the first token). No Hugging Face code is used;
``attnkit.pretrained`` maps checkpoint weights onto these modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ..functional.masks import Mask, padding
from ..nn import Encoder, TransformerConfig

__all__ = ["BertConfig", "BertEmbeddings", "BertPooler", "BertModel", "BertOutput", "HF_ACTIVATIONS", "set_dropout",
           "key_mask"]

# Hugging Face ``hidden_act`` -> attnkit activation name.
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT-family encoder (the fields of a Hugging Face ``config.json``)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0
    with_pooler: bool = True

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"BertConfig: `{name}` must be a positive integer, got {v!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"BertConfig: `hidden_size` ({self.hidden_size}) must be divisible by "
                             f"`num_attention_heads` ({self.num_attention_heads})")
        if self.hidden_act not in HF_ACTIVATIONS:
            raise ValueError(f"BertConfig: `hidden_act` must be one of {sorted(HF_ACTIVATIONS)}, "
                             f"got {self.hidden_act!r}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"BertConfig: `layer_norm_eps` must be > 0, got {self.layer_norm_eps!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"BertConfig: `pad_token_id` must be in [0, vocab_size), "
                             f"got {self.pad_token_id}")

    @classmethod
    def from_hf(cls, d: dict[str, Any], *, with_pooler: bool = True,
                source: str = "config.json") -> BertConfig:
        """Read the fields of a Hugging Face BERT ``config.json`` (other keys are ignored)."""
        model_type = d.get("model_type")
        if model_type != "bert":
            raise ValueError(f"{source}: unknown architecture: model_type {model_type!r} "
                             f"(architectures {d.get('architectures')}); attnkit reads model_type 'bert'")
        if d.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{source}: position_embedding_type {d['position_embedding_type']!r} is not "
                             "supported (only 'absolute')")
        required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size")
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"{source}: missing keys {missing}")
        kw = {k: d[k] for k in required}
        for k in ("max_position_embeddings", "type_vocab_size", "layer_norm_eps", "hidden_act"):
            if k in d:
                kw[k] = d[k]
        kw["pad_token_id"] = d.get("pad_token_id") or 0
        try:
            return cls(**kw, with_pooler=with_pooler)
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None

    def encoder_config(self) -> TransformerConfig:
        """The attnkit ``TransformerConfig`` of BERT's layer stack: post-LN, no input positions."""
        return TransformerConfig(
            d_model=self.hidden_size, num_heads=self.num_attention_heads, d_ff=self.intermediate_size,
            num_encoder_layers=self.num_hidden_layers, num_decoder_layers=0, dropout=0.0,
            attention_dropout=0.0, activation=HF_ACTIVATIONS[self.hidden_act], norm_first=False,
            final_norm=False, positional="none", max_len=self.max_position_embeddings,
            layer_norm_eps=float(self.layer_norm_eps))


class BertEmbeddings(nn.Module):
    """word(ids) + position(0..L-1) + token_type(type ids), then LayerNorm. (B, L) -> (B, L, d)."""

    def __init__(self, config: BertConfig, *, device=None, dtype=None):
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, **fk)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size, **fk)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size, **fk)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps, **fk)
        self.dropout = nn.Dropout(0.0)  # BERT's embedding dropout; 0 unless set for fine-tuning (set_dropout)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                position_ids: Tensor | None = None) -> Tensor:
        """``position_ids`` (B, L) default 0..L-1 in every row; sequences packed end to end (a
        ``segments`` mask) pass each one's own positions."""
        if input_ids.dim() != 2:
            raise ValueError(f"BertEmbeddings: `input_ids` must have shape (B, L), "
                             f"got {tuple(input_ids.shape)}")
        limit = self.position_embeddings.num_embeddings
        x = self.word_embeddings(input_ids)  # (B, L, d)
        if position_ids is None:
            length = input_ids.shape[1]
            if length > limit:
                raise ValueError(f"BertEmbeddings: sequence length {length} exceeds "
                                 f"max_position_embeddings {limit}")
            x = x + self.position_embeddings.weight[:length]  # (L, d) broadcast over B
        else:
            if position_ids.shape != input_ids.shape:
                raise ValueError(f"BertEmbeddings: `position_ids` must have the shape of `input_ids` "
                                 f"{tuple(input_ids.shape)}, got {tuple(position_ids.shape)}")
            if position_ids.numel() and not 0 <= int(position_ids.min()) <= int(position_ids.max()) < limit:
                raise ValueError(f"BertEmbeddings: `position_ids` must lie in [0, {limit}) "
                                 f"(max_position_embeddings)")
            x = x + self.position_embeddings(position_ids)  # (B, L, d)
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # (d,) broadcast
        else:
            x = x + self.token_type_embeddings(token_type_ids)  # (B, L, d)
        return self.dropout(self.norm(x))


class BertPooler(nn.Module):
    """tanh(W h_[CLS] + b): the first token's final vector. (B, L, d) -> (B, d)."""

    def __init__(self, config: BertConfig, *, device=None, dtype=None):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, device=device, dtype=dtype)

    def forward(self, hidden: Tensor) -> Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


class BertOutput(NamedTuple):
    last_hidden_state: Tensor  # (B, L, d)
    pooler_output: Tensor | None  # (B, d) when the model has a pooler
    hidden_states: tuple[Tensor, ...] | None  # embeddings + every layer's output: N + 1 of (B, L, d)
    attentions: tuple[Tensor, ...] | None  # per layer (B, H, L, L)


def key_mask(input_ids: Tensor, lengths: Tensor | None, mask: Mask | Tensor | None) -> Mask | Tensor | None:
    """The attention mask of a call given ``lengths`` (B,) (a padding mask where a row is shorter than L, else
    none) or ``mask`` as it is; a ValueError for both, or lengths of another shape."""
    if lengths is None:
        return mask
    if mask is not None:
        raise ValueError("BertModel: pass `lengths` or `mask`, not both")
    if lengths.shape != (input_ids.shape[0],):
        raise ValueError(f"BertModel: `lengths` must have shape ({input_ids.shape[0]},), got {tuple(lengths.shape)}")
    return padding(lengths) if bool((lengths < input_ids.shape[1]).any()) else None


class BertModel(nn.Module):
    """Embeddings -> attnkit Encoder (post-LN, GELU) -> optional pooler."""

    def __init__(self, config: BertConfig, *, device=None, dtype=None):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config, device=device, dtype=dtype)
        self.encoder = Encoder(config.encoder_config(), device=device, dtype=dtype)
        self.pooler = BertPooler(config, device=device, dtype=dtype) if config.with_pooler else None

    def forward(self, input_ids: Tensor, *, lengths: Tensor | None = None, mask: Mask | Tensor | None = None,
                token_type_ids: Tensor | None = None, position_ids: Tensor | None = None,
                need_weights: bool = False, output_hidden_states: bool = False, pool: bool = True,
                backend: str | None = None) -> BertOutput:
        """input_ids (B, L). ``lengths`` (B,): valid tokens per row (right padding); rows with all L
        tokens valid need no mask at all, so a batch without padding takes the fastest attention path.
        ``mask`` (True = may attend) is used as given when ``lengths`` is None. ``pool=False`` skips the pooler.
        Packed sequences (no padding): input_ids (1, T), ``mask=attnkit.masks.segments(lengths)`` and
        ``position_ids`` (1, T) restarting at 0 for each sequence.
        """
        mask = key_mask(input_ids, lengths, mask)
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, L, d)
        enc = self.encoder(x, mask, need_weights=need_weights, output_hidden_states=output_hidden_states,
                           backend=backend)
        pooled = self.pooler(enc.last_hidden_state) if pool and self.pooler is not None else None
        return BertOutput(enc.last_hidden_state, pooled, enc.hidden_states, enc.attentions)


def set_dropout(model: BertModel, hidden: float, attention: float) -> BertModel:
    """Set (in place) BERT's fine-tuning dropout: ``hidden`` after the embeddings and on every
    sub-layer's output before its residual addition, ``attention`` on the attention weights
    (Hugging Face's ``hidden_dropout_prob`` / ``attention_probs_dropout_prob``, 0.1 in BERT's configs).
    Loaded models start with both at 0 (inference). Returns ``model``."""
    for name, p in (("hidden", hidden), ("attention", attention)):
        if not 0.0 <= p < 1.0:
            raise ValueError(f"set_dropout: `{name}` must be in [0, 1), got {p!r}")
    model.embeddings.dropout.p = hidden
    for layer in model.encoder.layers:
        layer.attn_block.dropout.p = hidden
        layer.ff_block.dropout.p = hidden
        layer.self_attn.dropout = attention
    return model
