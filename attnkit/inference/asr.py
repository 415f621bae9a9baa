"""The speech engine: a speech recogniser's encoder and CTC head (``models.asr.AsrModel``) for inference.

``AsrEngine(spec, reference)``'s ``encode_frames`` is the model's call with the same outputs: the front end (the
normalisation and the two convolutions) on the reference modules, then the encoder as an ``EncoderStack`` read from
the spec (rotary positions: the tables made once per call, not per layer; the packed layer program; the window
mask through ``attnkit.attention``), then the CTC head from the spec (with ``ctc_layer`` k, on layer k's output
through the reference's ``ctc_norm``; ``ctc_only`` runs only those k layers). The decoder stays on the reference
model: the decoders of ``attnkit.generation`` read the memory this returns. Attention weights (``need_weights``) and
gradients come from the reference model.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..models.asr import AsrModel, Encoded
from .encoder import EncoderStack
from .packed import PackedLinear
from .spec import ModelSpec

__all__ = ["AsrEngine"]


class AsrEngine:
    """See the module doc. ``reference``: the model the spec was read from (front end, memory positions, weights)."""

    def __init__(self, spec: ModelSpec, reference: AsrModel):
        if spec.settings.architecture != "asr":
            raise ValueError(f"AsrEngine: needs a speech model's spec, got {spec.settings.architecture!r}")
        self.spec, self.reference = spec, reference
        self.encoder = EncoderStack(spec.encoder, spec.settings)
        self.ctc_head = PackedLinear(spec.output)

    @property
    def config(self):
        return self.reference.config

    def encode_frames(self, frames: Tensor, lengths: Tensor, *, backend: str | None = None,
                      need_weights: bool = False, ctc_only: bool = False) -> Encoded:
        """``AsrModel.encode_frames``: frames (B, T, n_mels), lengths (B,) -> ``Encoded``."""
        ref = self.reference
        if need_weights or torch.is_grad_enabled():
            return ref.encode_frames(frames, lengths, backend=backend, need_weights=need_weights, ctc_only=ctc_only)
        h, steps = ref.front(frames, lengths)  # (B, T', d), (B,)
        mask, k = ref.encoder_mask(steps), self.config.ctc_layers
        if ref.ctc_norm is None:  # the CTC head on the encoder's output
            out = self.encoder.run(h, mask, backend)  # (B, T', d)
            return ref.encoded(out, steps, self.ctc_head(out))
        if ctc_only:  # the first k layers only
            return ref.encoded(None, steps, self.ctc_head(ref.ctc_input(self.encoder.exit_at(h, mask, backend, k))))
        below, out = self.encoder.run(h, mask, backend, tap=k)
        return ref.encoded(out, steps, self.ctc_head(ref.ctc_input(below)))
