"""The non-autoregressive translation model (NAT): the whole sentence in one decoder pass.

The lecture's NAT: the decoder gets a row of start tokens instead of its own previous outputs and
writes every output token at once, so its **self-attention is unmasked** (each position sees every
other; ``is_causal=False``): nothing is produced left to right, there is no "future" to hide. The
output length is decided in one of two ways (``NATConfig.length``):

- ``"classifier"``: a classifier reads the encoder's output (its mean over the source tokens) and
  predicts the length as an offset from the source length, T - S in [-m, m]; decoding tries the
  ``length_candidates`` most likely lengths and keeps the best-scoring translation;
- ``"end"``: the decoder gets a long row (``ceil(row_ratio * S) + row_extra`` positions) and the
  output is cut at the first END; in training, the positions after END are labelled END too.

How it is trained (``NATConfig.nat_loss``; the losses are in ``models.nat_losses``):

- ``"mask-predict"`` (below);
- ``"glat"``: glancing training (Qian et al. 2021): a first pass over a row of mask tokens, then as many
  reference tokens revealed as ``glat_ratio`` x the positions it got wrong, the loss on the others;
- ``"ctc"``: the decoder's input is ceil(``ctc_upsample`` x S) mask tokens, the loss CTC over the target (the
  blank is the pad id, never a target token); the length comes out of the alignment, no classifier.

Training follows Mask-Predict (Ghazvininejad et al. 2019, a conditional masked language model):
a random number n ~ U{1..T} of target positions are replaced by the mask token (the start token by
default: with n = T the input is the lecture's row of start tokens) and predicted from the rest;
the length classifier's cross-entropy is added with weight ``length_loss_weight``. The same model
then decodes in one pass (everything masked) or refines its output over several iterations
(``attnkit.generation.mask_predict``).

- ``encode(input_ids, attention_mask) -> memory`` (B, S, d), as ``Seq2SeqModel``;
- ``length_logits(memory, attention_mask) -> (B, 2m + 1)``; ``length_candidates(...) -> (B, k)``;
- ``row_lengths(attention_mask) -> (B,)`` for ``"end"``;
- ``decode_parallel(tokens (B, T), memory, memory_mask, lengths) -> nn.DecoderOutput`` (hidden (B, T, d));
  ``output_logits(hidden) -> logits`` (decoding projects only the positions it needs);
- ``forward(input_ids, attention_mask, decoder_input_ids, target_lengths) -> (logits, length_logits)``.

It shares ``EncoderDecoderModel`` (embeddings, stacks, output layer, ``encode``) with ``Seq2SeqModel``
but has no step-by-step decoding: ``attnkit.generation.generate`` is for autoregressive models.
"""

from __future__ import annotations

from fractions import Fraction

import torch
from torch import Tensor, nn

from ..functional.masks import keep_positions, padding
from ..functional.pooling import masked_mean
from ..nn import LayerCache
from .configs.nat import LENGTH_STRATEGIES, NAT_LOSSES, NATConfig
from .seq2seq import EncoderDecoderModel, check_ids, memory_mask_from

__all__ = ["NATConfig", "NATModel", "random_mask", "choose_positions", "length_classes", "source_lengths",
           "row_lengths_for", "ctc_row_lengths", "ctc_row_length", "ctc_fraction", "is_nat", "NAT_LOSSES",
           "LENGTH_STRATEGIES"]

def is_nat(model) -> bool:
    """Does ``model`` decode non-autoregressively (the ``mask_predict`` protocol)?"""
    return callable(getattr(model, "decode_parallel", None)) and isinstance(getattr(model, "config", None), NATConfig)


def length_classes(target_lengths: Tensor, source_lengths: Tensor, max_offset: int) -> Tensor:
    """The length classifier's label of each target length: (T - S) clamped to [-m, m], + m -> (B,) int64."""
    return (target_lengths - source_lengths).clamp(-max_offset, max_offset) + max_offset


def source_lengths(attention_mask: Tensor | None, memory: Tensor) -> Tensor:
    """(B,) real source tokens (S of each row) of a memory (B, S, d) and its attention_mask (B, S) or None."""
    if attention_mask is None:
        return torch.full((memory.shape[0],), memory.shape[1], dtype=torch.long, device=memory.device)
    return attention_mask.bool().sum(1)


def row_lengths_for(source_lengths: Tensor, config: NATConfig) -> Tensor:
    """"end": the row written for a source of S tokens, ceil(row_ratio * S) + row_extra, at most
    ``max_target_length`` -> (B,) int64."""
    rows = (source_lengths.double() * config.row_ratio).ceil().long() + config.row_extra
    return rows.clamp(1, config.max_target_length)


def ctc_row_lengths(source_lengths: Tensor, config: NATConfig) -> Tensor:
    """CTC: the row written for a source of S tokens, ceil(``ctc_upsample`` x S), in [1, max_target_length] ->
    (B,). The ratio is taken as the fraction p / q nearest it (q <= 1000), so the row is exact integer arithmetic:
    (S p + q - 1) // q, never one more from a float's rounding (1.1 x 10 is 11, not 12)."""
    p, q = ctc_fraction(config)
    return ((source_lengths.long() * p + q - 1) // q).clamp(1, config.max_target_length)


def ctc_row_length(source_length: int, config: NATConfig) -> int:
    """``ctc_row_lengths`` of one source length, in Python."""
    p, q = ctc_fraction(config)
    return min(max((source_length * p + q - 1) // q, 1), config.max_target_length)


def ctc_fraction(config: NATConfig) -> tuple[int, int]:
    """``ctc_upsample`` as the fraction p / q nearest it with q <= 1000 -> (p, q): 1.5 -> (3, 2), 2 -> (2, 1)."""
    f = Fraction(config.ctc_upsample).limit_denominator(1000)
    return f.numerator, f.denominator


def random_mask(lengths: Tensor, width: int, generator: torch.Generator | None = None) -> Tensor:
    """Mask-Predict's training mask: per row b, n ~ U{1..lengths[b]} of its first ``lengths[b]``
    positions, chosen uniformly -> bool (B, width), True = masked (to predict). Rows of length 0 get none."""
    u = torch.rand(lengths.shape[0], generator=generator, device=lengths.device)
    n = (u * lengths).floor().long() + 1  # (B,) uniform in 1..length
    return choose_positions(n, lengths, width, generator)


def choose_positions(n: Tensor, lengths: Tensor, width: int, generator: torch.Generator | None = None) -> Tensor:
    """Per row b, min(n[b], lengths[b]) of its first ``lengths[b]`` positions, chosen uniformly -> bool (B, width)."""
    b, dev = lengths.shape[0], lengths.device
    scores = torch.rand(b, width, generator=generator, device=dev)  # (B, W) random order of positions
    scores = scores.masked_fill(~keep_positions(lengths, width), 2.0)  # padding ranks last
    rank = scores.argsort(dim=1).argsort(dim=1)  # (B, W) rank of each position in that order
    return (rank < n[:, None]) & keep_positions(lengths, width)


class NATModel(EncoderDecoderModel):
    """``EncoderDecoderModel``'s embeddings, encoder and decoder, decoded in parallel, plus a length classifier."""

    config: NATConfig

    def __init__(self, config: NATConfig, *, device=None, dtype=None):
        if not isinstance(config, NATConfig):
            raise ValueError(f"NATModel: `config` must be a NATConfig, got {type(config).__name__}")
        super().__init__(config, device=device, dtype=dtype)
        classes = 2 * config.max_length_offset + 1
        self.length_head = nn.Linear(config.transformer.d_model, classes, device=device, dtype=dtype) \
            if config.has_length_head else None

    # -- length ---------------------------------------------------------------------------------
    source_lengths = staticmethod(source_lengths)

    def length_logits(self, memory: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """memory (B, S, d) -> logits (B, 2m + 1) over T - S = -m .. m."""
        if self.length_head is None:
            raise ValueError("NATModel: this model has no length classifier (it cuts its output at END, "
                             "length='end', or CTC's alignment decides it, nat_loss='ctc')")
        pooled = masked_mean(memory, self.source_lengths(attention_mask, memory))  # (B, d)
        return self.length_head(pooled)

    def length_candidates(self, memory: Tensor, attention_mask: Tensor | None = None, k: int = 1) -> Tensor:
        """The ``k`` most likely lengths (B, k), best first, each in [1, max_target_length]."""
        logits = self.length_logits(memory, attention_mask)  # (B, 2m + 1)
        k = min(k, logits.shape[1])
        offsets = logits.topk(k, dim=1).indices - self.config.max_length_offset  # (B, k)
        lengths = self.source_lengths(attention_mask, memory)[:, None] + offsets
        return lengths.clamp(1, self.config.max_target_length)

    def row_lengths(self, attention_mask: Tensor | None, memory: Tensor) -> Tensor:
        """"end": the row to write for each source (``row_lengths_for``) -> (B,)."""
        return row_lengths_for(self.source_lengths(attention_mask, memory), self.config)

    def ctc_rows(self, attention_mask: Tensor | None, memory: Tensor) -> Tensor:
        """CTC: the row to write for each source (``ctc_row_lengths``) -> (B,)."""
        return ctc_row_lengths(self.source_lengths(attention_mask, memory), self.config)

    # -- decoding -------------------------------------------------------------------------------
    def decode_parallel(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
                        lengths: Tensor | None = None, *, cache: list[LayerCache] | None = None,
                        use_cache: bool = False, output_attentions: bool = False):
        """Every position at once: tokens (B, T) (mask tokens where unknown), memory (B, S, d), lengths (B,)
        of the rows (positions past them are padding and hidden from the others) -> ``nn.DecoderOutput``
        (``last_hidden_state`` (B, T, d); ``output_logits`` makes logits of it). Self-attention is unmasked
        (``is_causal=False``).

        ``cache`` may carry the cross-attention keys and values of an earlier call (``LayerCache(None, kv)``
        per layer, static): Mask-Predict's iterations reuse them instead of projecting ``memory`` again.
        """
        check_ids(tokens, "tokens", self.config.tgt_vocab_size)
        if memory.dim() != 3 or memory.shape[0] != tokens.shape[0]:
            raise ValueError(f"NATModel: `memory` must have shape ({tokens.shape[0]}, S, d), got {tuple(memory.shape)}")
        width = tokens.shape[1]
        self_mask = None
        if lengths is not None:
            if lengths.shape != (tokens.shape[0],) or (lengths.numel() and int(lengths.max()) > width):
                raise ValueError(f"NATModel: `lengths` must be ({tokens.shape[0]},) values <= {width}, "
                                 f"got {tuple(lengths.shape)}")
            if bool((lengths < width).any()):
                self_mask = padding(lengths)
        y = self.target_embedding(tokens) * self.embed_scale  # (B, T, d)
        return self.decoder(y, memory, self_mask=self_mask, memory_mask=memory_mask_from(memory_mask, memory.shape[1]),
                            is_causal=False, cache=cache, use_cache=use_cache, need_weights=output_attentions)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None, decoder_input_ids: Tensor,
                target_lengths: Tensor | None = None, positions: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Training: source (B, S), the partly masked target rows (B, T) and their lengths (B,)
        -> token logits (B, T, V) and length logits (B, 2m + 1) (None for "end").

        ``positions`` (B, T) bool: logits only there, (M, V) for its M True entries (the loss needs
        only the masked positions; the output projection is the largest matrix product here)."""
        memory = self.encode(input_ids, attention_mask)
        hidden = self.decode_parallel(decoder_input_ids, memory, attention_mask, target_lengths).last_hidden_state
        logits = self.output_logits(hidden if positions is None else hidden[positions])  # (B, T, V) or (M, V)
        lengths = self.length_logits(memory, attention_mask) if self.length_head is not None else None
        return logits, lengths

