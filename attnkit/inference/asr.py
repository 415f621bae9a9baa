"""The speech engine: a speech recogniser's encoder and CTC head (``models.asr.AsrModel``) for inference.

``AsrEngine(spec, reference)``'s ``encode_frames`` is the model's call with the same outputs: the front end (the
normalisation, then each convolution of stride 2 as one matrix product over windows of frames, ``PackedFrontend``;
the ``conv2d`` front end on the reference modules), then the encoder as an ``EncoderStack`` read from
the spec (rotary positions: the tables made once per call, not per layer; the packed layer program; the window
mask through ``attnkit.attention``), then the CTC head from the spec (with ``ctc_layer`` k, on layer k's output
through the reference's ``ctc_norm``; ``ctc_only`` runs only those k layers). The decoder stays on the reference
model: the decoders of ``attnkit.generation`` read the memory this returns. Attention weights (``need_weights``) and
gradients come from the reference model.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import masks
from ..models.asr import AsrModel, Encoded
from ..models.asr_frontend import Frontend, half
from .encoder import EncoderStack
from .packed import PackedLinear
from .quant_linear import linear_for
from .spec import ModelSpec

__all__ = ["AsrEngine", "PackedFrontend"]


class PackedFrontend:
    """A ``conv1d`` front end (``models.asr_frontend.Frontend``) as matrix products, time-major throughout: each
    convolution of stride 2 reads windows of k consecutive frames, each window k C contiguous numbers (a strided
    view of the padded frames, no copy), through a ``PackedLinear`` with W (d, k C) and the GELU in the kernel.
    normalised frames (B, T, n_mels), lengths (B,) -> (B, T', d), the same as the module."""

    def __init__(self, ref: Frontend):
        if ref.kind != "conv1d":
            raise ValueError(f"PackedFrontend: runs the conv1d front end, got {ref.kind!r}")
        self.kernel, self.pad = ref.kernel, ref.time_pad()
        self.layers = [PackedLinear(SimpleNamespace(  # (d, C, k) -> (d, k, C) -> (d, k C): a window's order
            weight=c.weight.detach().permute(0, 2, 1).reshape(c.out_channels, -1).contiguous(),
            bias=c.bias.detach()), "gelu") for c in ref.convs]

    def __call__(self, x: Tensor, lengths: Tensor) -> Tensor:
        k = self.kernel
        for linear in self.layers:
            b, t, c = x.shape
            if bool((lengths < t).any()):  # padding to zero, as the module does (none at batch 1)
                x = x * masks.keep_positions(lengths, t).to(x.dtype)[:, :, None]
            x = F.pad(x, (0, 0, *self.pad)).contiguous()  # (B, T + k - 1, C)
            out = (x.shape[1] - k) // 2 + 1  # = ceil(T / 2)
            windows = x.as_strided((b, out, k * c), (x.shape[1] * c, 2 * c, 1))  # (B, T', k C), rows overlap
            x = linear(windows)  # (B, T', k C) -> (B, T', d)
            lengths = half(lengths)
        return x


class AsrEngine:
    """See the module doc. ``reference``: the model the spec was read from (front end, memory positions, weights)."""

    def __init__(self, spec: ModelSpec, reference: AsrModel):
        if spec.settings.architecture != "asr":
            raise ValueError(f"AsrEngine: needs a speech model's spec, got {spec.settings.architecture!r}")
        self.spec, self.reference = spec, reference
        self.encoder = EncoderStack(spec.encoder, spec.settings)
        self.ctc_head = linear_for(spec.output)
        self.frontend = PackedFrontend(reference.frontend) if reference.frontend.kind == "conv1d" else None

    @property
    def config(self):
        return self.reference.config

    def front(self, frames: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``AsrModel.front``: frames (B, T, n_mels), lengths (B,) -> the encoder's input (B, T', d), steps (B,)."""
        ref = self.reference
        if self.frontend is None:
            return ref.front(frames, lengths)
        ref.check_frames(frames, lengths)
        h = self.frontend((frames - ref.feature_mean) / ref.feature_std, lengths)
        return h, ref.out_lengths(lengths).clamp(1, h.shape[1])

    def encode_frames(self, frames: Tensor, lengths: Tensor, *, backend: str | None = None,
                      need_weights: bool = False, ctc_only: bool = False) -> Encoded:
        """``AsrModel.encode_frames``: frames (B, T, n_mels), lengths (B,) -> ``Encoded``."""
        ref = self.reference
        if need_weights or torch.is_grad_enabled():
            return ref.encode_frames(frames, lengths, backend=backend, need_weights=need_weights, ctc_only=ctc_only)
        h, steps = self.front(frames, lengths)  # (B, T', d), (B,)
        mask, k = ref.encoder_mask(steps), self.config.ctc_layers
        if ref.ctc_norm is None:  # the CTC head on the encoder's output
            out = self.encoder.run(h, mask, backend)  # (B, T', d)
            return ref.encoded(out, steps, self.ctc_head(out))
        if ctc_only:  # the first k layers only
            return ref.encoded(None, steps, self.ctc_head(ref.ctc_input(self.encoder.exit_at(h, mask, backend, k))))
        below, out = self.encoder.run(h, mask, backend, tap=k)
        return ref.encoded(out, steps, self.ctc_head(ref.ctc_input(below)))
