"""Speech recognition of spoken digits: the lecture's encoder-decoder on sound, with a CTC head (hybrid
CTC/attention, Watanabe et al. 2017, as ESPnet trains it).

    log-mel frames (B, T, n_mels) -> global mean / variance normalisation -> three convolutions of stride 2
    (``subsample`` 8: 80 ms a step; two with 4: 40 ms) -> Transformer encoder with
    truncated (window) self-attention -> memory (B, T', d)
       -> CTC head: log-probabilities (B, T', 11) over blank + the ten digits, every frame at once (on layer
          k's output, normalised, ``ctc_layer`` k: by default the middle layer; then the CTC one pass runs only
          the first k layers, the intermediate CTC of Lee and Watanabe 2021 as an early exit; 0: the last)
       -> decoder: BOS, then one digit token per step (its own previous outputs fed back, the memory read
          through cross-attention), END; tokens PAD 0, BOS 1, END 2, digit d = 3 + d.

Encoder positions are rotary (RoPE, relative), so a window of frames computes the same wherever it starts:
that is what lets ``streaming`` (causal convolutions and a window with no right context) run the encoder
on chunks (``models.asr_stream``) with the same outputs as on the whole utterance, and what keeps the CTC
head's frame labels the same on inputs longer than any seen in training. The decoder, though, must find
the k-th digit: its cross-attention reads the encoder's output with absolute sinusoidal positions added
(without them every key says what it heard but not where: a decoder trained so, greedy, wrote 58% digit
errors on the dev set where the same encoder's CTC head wrote 2.3%).

The decoding protocol of ``attnkit.generation``: ``encode_frames`` (memory, its mask, CTC log-probs),
``decode_step``, ``reorder_cache``, ``config`` (token ids, ``max_positions``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import masks
from ..functional.gradient import grad_reverse
from ..nn import Decoder, Encoder, LayerCache
from ..nn.positional import Sinusoidal
from .asr_frontend import Frontend, out_lengths
from .configs.asr import BOS, EOS, PAD, STREAMING_WINDOW, AsrConfig
from .seq2seq import Seq2SeqModel, StepOutput, memory_mask_from

__all__ = ["AsrConfig", "AsrModel", "Encoded", "PAD", "BOS", "EOS", "FIRST_DIGIT", "BLANK", "NUM_TOKENS", "NUM_CLASSES",
           "STREAMING_WINDOW", "digit_tokens", "token_digits", "label_of_tokens", "encoder_mask", "check_frames",
           "encoded"]

FIRST_DIGIT = 3  # token id of digit 0
NUM_TOKENS = FIRST_DIGIT + 10
BLANK = 0  # CTC class 0; digit d is class 1 + d
NUM_CLASSES = 11


def digit_tokens(digits) -> list[int]:
    return [FIRST_DIGIT + int(d) for d in digits]


def token_digits(tokens) -> list[int]:
    """Decoder tokens -> digits (PAD, BOS and END dropped)."""
    return [int(t) - FIRST_DIGIT for t in tokens if int(t) >= FIRST_DIGIT]


def label_of_tokens() -> Tensor:
    """(NUM_TOKENS,): the CTC class of each decoder token, -1 for PAD / BOS / END."""
    out = torch.full((NUM_TOKENS,), -1, dtype=torch.long)
    out[FIRST_DIGIT:] = torch.arange(1, NUM_CLASSES)
    return out


class Encoded(NamedTuple):
    memory: Tensor | None  # (B, T', d): the encoder's output + absolute positions (the decoder's); None: CTC only
    mask: Tensor  # (B, T') int64, 1 = a real step
    lengths: Tensor  # (B,) steps
    ctc_log_probs: Tensor  # (B, T', NUM_CLASSES)


def encoder_mask(lengths: Tensor, window: tuple[int, int] | None) -> masks.Mask:
    """The encoder's self-attention mask for steps (B,): the padding, and with ``window`` (left, right) only the
    steps that near each query."""
    pad = masks.padding(lengths)
    return pad if window is None else masks.window(*window) & pad


def check_frames(frames: Tensor, lengths: Tensor, n_mels: int) -> None:
    """A one-line error unless frames is (B, T, n_mels) and lengths (B,)."""
    if frames.dim() != 3 or frames.shape[-1] != n_mels:
        raise ValueError(f"AsrModel: `frames` must have shape (B, T, {n_mels}), got {tuple(frames.shape)}")
    if lengths.shape != frames.shape[:1]:
        raise ValueError(f"AsrModel: `lengths` must have shape ({frames.shape[0]},), got {tuple(lengths.shape)}")


def encoded(out: Tensor | None, steps: Tensor, ctc_logits: Tensor, positions) -> Encoded:
    """The encoder's output (B, T', d) (None: CTC only), its steps and the CTC head's logits -> ``Encoded``: the
    memory is the output with ``positions(out)`` (the absolute ones the decoder reads) added."""
    mask = masks.keep_positions(steps, ctc_logits.shape[1]).long()
    memory = None if out is None else positions(out)
    return Encoded(memory, mask, steps, ctc_logits.float().log_softmax(-1))  # CTC (B, T', C)


class AsrModel(nn.Module):
    """See the module docstring. ``forward`` is the training pass (teacher forcing + CTC)."""

    def __init__(self, config: AsrConfig = AsrConfig(), *, device=None, dtype=None):
        super().__init__()
        self.config = config
        fk = {"device": device, "dtype": dtype}
        d, k = config.encoder.d_model, config.kernel
        self.register_buffer("feature_mean", torch.zeros(config.n_mels, **fk))  # set from the training data
        self.register_buffer("feature_std", torch.ones(config.n_mels, **fk))
        self.frontend = Frontend(config.n_mels, d, k, config.frontend, config.channels, causal=config.streaming,
                                 subsample=config.subsample, **fk)
        self.encoder = Encoder(config.encoder, **fk)
        early = config.ctc_layers < config.encoder.num_encoder_layers
        self.ctc_norm = nn.LayerNorm(d, eps=config.encoder.layer_norm_eps, **fk) if early else None
        self.memory_position = Sinusoidal(d, 512, device=device, dtype=dtype)  # grows itself for longer inputs
        self.ctc_head = nn.Linear(d, NUM_CLASSES, **fk)
        self.embed = nn.Embedding(NUM_TOKENS, d, padding_idx=PAD, **fk)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        with torch.no_grad():
            self.embed.weight[PAD].zero_()
        self.decoder = Decoder(config.decoder, **fk)
        self.embed_scale = d ** 0.5
        # which training speaker, per step (speaker-adversarial training only); made last, so that the other modules
        # start from the same weights with it as without it
        n = config.adversary_speakers
        self.adversary = nn.Sequential(nn.Linear(d, d, **fk), nn.ReLU(), nn.Linear(d, n, **fk)) if n else None

    # -- encoder ---------------------------------------------------------------------------------
    @property
    def subsample(self) -> int:
        """Frames per encoder step."""
        return self.config.subsample

    def out_lengths(self, lengths: Tensor) -> Tensor:
        """Steps after the front end for frame counts (B,): T halved, rounding up, once per convolution."""
        return out_lengths(lengths, self.subsample.bit_length() - 1)

    def features(self, frames: Tensor, lengths: Tensor) -> Tensor:
        """frames (B, T, n_mels) -> (B, T', d), T' = out_lengths(T): normalised, then the front end."""
        return self.frontend((frames - self.feature_mean) / self.feature_std, lengths)

    def encoder_mask(self, lengths: Tensor) -> masks.Mask:
        return encoder_mask(lengths, self.config.window)

    def check_frames(self, frames: Tensor, lengths: Tensor) -> None:
        check_frames(frames, lengths, self.config.n_mels)

    def front(self, frames: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """frames (B, T, n_mels), lengths (B,) checked -> the encoder's input (B, T', d) and its steps (B,)."""
        self.check_frames(frames, lengths)
        h = self.features(frames, lengths)
        return h, self.out_lengths(lengths).clamp(1, h.shape[1])

    def ctc_input(self, below: Tensor) -> Tensor:
        """The output of the first ``ctc_layers`` encoder layers (B, T', d) -> what the CTC head reads: layer k's
        output normalised (``ctc_layer`` k), or the last layer's (the encoder's output, its final norm applied)."""
        return below if self.ctc_norm is None else self.ctc_norm(below)

    def encoded(self, out: Tensor | None, steps: Tensor, ctc_logits: Tensor) -> Encoded:
        """The encoder's output (B, T', d) (None: CTC only), its steps and the CTC head's logits -> ``Encoded``."""
        return encoded(out, steps, ctc_logits, self.memory_position)

    def encode_frames(self, frames: Tensor, lengths: Tensor, *, backend: str | None = None,
                      need_weights: bool = False, ctc_only: bool = False) -> Encoded:
        """frames (B, T, n_mels), lengths (B,) -> ``Encoded`` (memory, its mask, lengths, CTC log-probs).
        ``ctc_only``: the CTC head's input only (the first ``ctc_layers`` layers; memory None)."""
        return self._encode(frames, lengths, backend=backend, need_weights=need_weights, ctc_only=ctc_only)[0]

    def _encode(self, frames: Tensor, lengths: Tensor, *, backend: str | None = None, need_weights: bool = False,
                ctc_only: bool = False) -> tuple[Encoded, Tensor]:
        """``encode_frames``, and what the CTC head read (B, T', d)."""
        h, steps = self.front(frames, lengths)
        mask, k = self.encoder_mask(steps), self.config.ctc_layers
        if self.ctc_norm is None:  # the CTC head on the encoder's output
            out = self.encoder(h, mask, backend=backend, need_weights=need_weights).last_hidden_state
            return self.encoded(out, steps, self.ctc_head(out)), out
        if ctc_only:
            below = self.encoder(h, mask, backend=backend, need_weights=need_weights, num_layers=k).last_hidden_state
            below = self.ctc_input(below)
            return self.encoded(None, steps, self.ctc_head(below)), below
        res = self.encoder(h, mask, backend=backend, need_weights=need_weights, output_hidden_states=True)
        below = self.ctc_input(res.hidden_states[k])
        return self.encoded(res.last_hidden_state, steps, self.ctc_head(below)), below

    # -- the decoding protocol -----------------------------------------------------------------------
    def encode(self, frames: Tensor, lengths: Tensor) -> Tensor:
        return self.encode_frames(frames, lengths).memory

    def decode(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None, *,
               cache: list[LayerCache] | None = None, use_cache: bool = False, output_attentions: bool = False):
        """tokens (B, t) -> ``nn.DecoderOutput`` (hidden (B, t, d), ...); with ``cache``, they continue it."""
        if tokens.dim() != 2 or tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= NUM_TOKENS):
            raise ValueError(f"AsrModel: `tokens` must be (B, t) ids in [0, {NUM_TOKENS}), got {tuple(tokens.shape)}")
        y = self.embed(tokens) * self.embed_scale
        return self.decoder(y, memory, memory_mask=memory_mask_from(memory_mask, memory.shape[1]), cache=cache,
                            use_cache=use_cache, need_weights=output_attentions)

    def logits(self, hidden: Tensor) -> Tensor:
        return F.linear(hidden, self.embed.weight)  # (..., d) -> (..., NUM_TOKENS), tied to the embedding

    def decode_step(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
                    cache: list[LayerCache] | None = None, *, use_cache: bool = True,
                    output_attentions: bool = False) -> StepOutput:
        out = self.decode(tokens, memory, memory_mask, cache=cache, use_cache=use_cache,
                          output_attentions=output_attentions)
        return StepOutput(self.logits(out.last_hidden_state[:, -1]), out.cache, out.cross_attentions)

    reorder_cache = staticmethod(Seq2SeqModel.reorder_cache)

    # -- training --------------------------------------------------------------------------------
    def forward(self, frames: Tensor, lengths: Tensor, decoder_input: Tensor, *, positions: Tensor | None = None,
                adversary_scale: float = 0.0) -> tuple[Tensor, Encoded, Tensor | None]:
        """Teacher forcing: decoder logits (B, t, V) (or (N, V) at ``positions`` (B, t) bool), the ``Encoded`` (its
        CTC log-probabilities for the CTC loss) and, with ``adversary_scale`` > 0 and an adversary, its logits over
        the training speakers at every step (B, T', speakers), read through a gradient reversal of that scale
        (else None)."""
        enc, ctc_input = self._encode(frames, lengths)
        hidden = self.decode(decoder_input, enc.memory, enc.mask).last_hidden_state
        logits = self.logits(hidden if positions is None else hidden[positions])
        speakers = None
        if adversary_scale > 0:
            if self.adversary is None:
                raise ValueError("AsrModel: `adversary_scale` > 0 needs a model with `adversary_speakers` > 0")
            speakers = self.adversary(grad_reverse(ctc_input, adversary_scale))
        return logits, enc, speakers
