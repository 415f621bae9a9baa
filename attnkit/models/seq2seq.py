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

These four are the protocol ``attnkit.generation`` decodes through. The embeddings, the stacks, the output
projection and ``encode`` are ``EncoderDecoderModel``'s (``encoder_decoder.py``), which ``NATModel`` shares;
this file adds step-by-step decoding.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor

from ..nn import LayerCache
from ..nn.attention import KVCache
from .encoder_decoder import EncoderDecoderModel, Seq2SeqConfig, memory_mask_from

__all__ = ["Seq2SeqConfig", "Seq2SeqModel", "StepOutput", "memory_mask_from", "EncoderDecoderModel"]


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
        self._check_ids(decoder_input_ids, "decoder_input_ids", self.config.tgt_vocab_size)
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

