"""The sequence-to-sequence Transformer (translation): token embeddings, ``Encoder``, ``Decoder``, output layer.

The lecture's picture: the encoder reads the source once; the decoder starts from a start token (BOS),
feeds its own previous outputs back through masked self-attention, reads the encoder's output through
cross-attention (queries from the decoder, keys and values from the encoder) and stops at END (EOS).

- ``encode(input_ids, attention_mask) -> memory`` (B, S, d): once per sentence.
- ``decode_step(tokens, memory, memory_mask, cache) -> StepOutput(logits (B, V), cache, ...)``: one
  decoding step. With a cache, ``tokens`` holds only the new token(s): the decoder's self-attention
  keys and values of earlier steps come from the cache, and the cross-attention keys and values are
  projected from ``memory`` on the first call and kept (static) after that.
- ``reorder_cache(cache, index)``: beam search moves rows of the cache.
- ``forward(input_ids, attention_mask, decoder_input_ids) -> logits`` (B, T, V): teacher forcing.

These four are the protocol ``attnkit.generation`` decodes through. The embeddings (scaled by sqrt(d_model),
optionally one table for source, target and output), the stacks, the output projection (optionally with a fixed
bias, as Marian has) and ``encode`` are ``EncoderDecoderModel``'s, the base ``NATModel`` (``nat.py``) shares;
``Seq2SeqModel`` adds step-by-step decoding, ``NATModel`` decoding in parallel: neither has a method it refuses.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..functional.masks import Dense, Mask, keep_positions, padding
from ..nn import Decoder, Encoder, LayerCache
from ..nn.attention import KVCache
from .configs.seq2seq import Seq2SeqConfig

__all__ = ["Seq2SeqConfig", "Seq2SeqModel", "StepOutput", "memory_mask_from", "check_ids", "EncoderDecoderModel"]



def check_ids(ids: Tensor, name: str, vocab: int) -> None:
    """A one-line ValueError naming ``name`` unless ``ids`` is a (B, L) integer tensor of ids in [0, vocab) (the
    model's check of its inputs, and its engines')."""
    if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
        got = f"{ids.dtype} {tuple(ids.shape)}" if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(f"Seq2SeqModel: `{name}` must be a (B, L) integer tensor, got {got}")
    if ids.numel():
        lo, hi = (int(v) for v in torch.aminmax(ids))  # one pass (this runs at every decoding step)
        if lo < 0 or hi >= vocab:
            raise ValueError(f"Seq2SeqModel: `{name}` has ids in [{lo}, {hi}], outside the vocabulary [0, {vocab})")


def memory_mask_from(attention_mask: Tensor | None, length: int) -> Mask | None:
    """A (B, S) 0/1 or bool source mask (1 = real token) -> an attnkit key mask, or None (nothing hidden).

    Right padding (ones then zeros, the usual case) becomes ``masks.padding(lengths)``, which fast kernels
    read; any other pattern a dense (B, 1, S) mask.
    """
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2 or attention_mask.shape[1] != length:
        raise ValueError(f"Seq2SeqModel: `attention_mask` must have shape (B, {length}), "
                         f"got {tuple(attention_mask.shape)}")
    keep = attention_mask.bool()
    if bool(keep.all()):
        return None
    lengths = keep.sum(1)
    if torch.equal(keep, keep_positions(lengths, length)):
        return padding(lengths)
    return Dense(keep[:, None, :])  # (B, 1, S): every query row of a sentence hides the same keys


class EncoderDecoderModel(nn.Module):
    """Embeddings + ``attnkit.nn.Encoder`` + ``attnkit.nn.Decoder`` + output projection (see the module doc)."""

    def __init__(self, config: Seq2SeqConfig, *, device=None, dtype=None):
        super().__init__()
        self.config = config
        tc, fk = config.transformer, {"device": device, "dtype": dtype}
        d = tc.d_model
        self.src_embed = nn.Embedding(config.src_vocab_size, d, padding_idx=config.pad_token_id, **fk)
        self.tgt_embed = None if config.share_embeddings else \
            nn.Embedding(config.tgt_vocab_size, d, padding_idx=config.pad_token_id, **fk)
        self.encoder = Encoder(tc, **fk)
        self.decoder = Decoder(tc, **fk)
        self.lm_head = None if config.tie_output else nn.Linear(d, config.tgt_vocab_size, bias=False, **fk)
        if config.final_logits_bias:
            self.register_buffer("final_logits_bias", torch.zeros(config.tgt_vocab_size, **fk))
        else:
            self.final_logits_bias = None
        self.embed_scale = math.sqrt(d) if config.scale_embedding else 1.0
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        std = self.config.transformer.d_model ** -0.5  # with the sqrt(d) scale: unit-size input vectors
        for emb in (self.src_embed, self.tgt_embed):
            if emb is not None:
                nn.init.normal_(emb.weight, std=std)
                with torch.no_grad():
                    emb.weight[self.config.pad_token_id].zero_()
        if self.lm_head is not None:
            nn.init.normal_(self.lm_head.weight, std=std)

    @property
    def target_embedding(self) -> nn.Embedding:
        return self.src_embed if self.tgt_embed is None else self.tgt_embed

    def output_logits(self, hidden: Tensor) -> Tensor:
        """Decoder states (..., d) -> logits (..., V)."""
        weight = self.target_embedding.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(hidden, weight)
        if self.final_logits_bias is not None:
            logits = logits + self.final_logits_bias
        return logits

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """input_ids (B, S), attention_mask (B, S) 1 = real token -> memory (B, S, d)."""
        check_ids(input_ids, "input_ids", self.config.src_vocab_size)
        x = self.src_embed(input_ids) * self.embed_scale  # (B, S, d)
        return self.encoder(x, memory_mask_from(attention_mask, input_ids.shape[1])).last_hidden_state


class StepOutput(NamedTuple):
    logits: Tensor  # (B, V) for the last position
    cache: list[LayerCache] | None
    cross_attentions: tuple[Tensor, ...] | None  # per layer (B, H, t, S), t = the new positions

class Seq2SeqModel(EncoderDecoderModel):
    """``EncoderDecoderModel`` decoded step by step (see the module doc)."""

    # -- the protocol (encode: ``EncoderDecoderModel.encode``) --------------------------------------
    def decode(self, decoder_input_ids: Tensor, memory: Tensor, memory_mask: Tensor | None = None, *,
               cache: list[LayerCache] | None = None, use_cache: bool = False, output_attentions: bool = False):
        """All positions of ``decoder_input_ids`` (B, T) at once -> ``nn.DecoderOutput`` (hidden (B, T, d), ...).

        With ``cache``, the ids continue the cached prefix (their positions start after it).
        """
        check_ids(decoder_input_ids, "decoder_input_ids", self.config.tgt_vocab_size)
        if memory.dim() != 3 or memory.shape[0] != decoder_input_ids.shape[0]:
            raise ValueError(f"Seq2SeqModel: `memory` must have shape ({decoder_input_ids.shape[0]}, S, d), "
                             f"got {tuple(memory.shape)}")
        y = self.target_embedding(decoder_input_ids) * self.embed_scale  # (B, T, d)
        return self.decoder(y, memory, memory_mask=memory_mask_from(memory_mask, memory.shape[1]), cache=cache,
                            use_cache=use_cache, need_weights=output_attentions)

    def decode_step(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
                    cache: list[LayerCache] | None = None, *, use_cache: bool = True,
                    output_attentions: bool = False) -> StepOutput:
        """tokens (B, t): the whole prefix without a cache, the new token(s) with one -> logits (B, V)
        of the last position, the updated cache (None unless ``use_cache``), cross-attention per layer."""
        out = self.decode(tokens, memory, memory_mask, cache=cache, use_cache=use_cache,
                          output_attentions=output_attentions)
        logits = self.output_logits(out.last_hidden_state[:, -1])  # (B, V)
        return StepOutput(logits, out.cache, out.cross_attentions)

    @staticmethod
    def reorder_cache(cache: list[LayerCache], index: Tensor, *, cross: bool = True) -> list[LayerCache]:
        """Row i of the new cache is row ``index[i]`` of the old one (index (B',) int64).

        ``cross=False`` leaves the cross-attention keys and values as they are: right when every row
        moves within a group of rows that share one source sentence (beams of a sentence), whose
        cross-attention entries are equal; it saves copying them at every step.
        """

        def pick(kv: KVCache | None, move: bool) -> KVCache | None:
            if kv is None or not move:
                return kv
            return KVCache(kv.k.index_select(0, index), kv.v.index_select(0, index), kv.static)

        return [LayerCache(pick(c.self_kv, True), pick(c.cross_kv, cross)) for c in cache]

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None, decoder_input_ids: Tensor, *,
                positions: Tensor | None = None) -> Tensor:
        """Teacher forcing: source (B, S) and the shifted target (B, T) -> logits (B, T, V).

        ``positions`` (B, T) bool: only those positions' logits, (N, V) in row-major order (training
        skips the output layer, the largest matrix product, on padding).
        """
        memory = self.encode(input_ids, attention_mask)
        hidden = self.decode(decoder_input_ids, memory, attention_mask).last_hidden_state  # (B, T, d)
        return self.output_logits(hidden if positions is None else hidden[positions])

