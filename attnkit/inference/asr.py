"""The speech engine: a speech recogniser's encoder and CTC head (``models.asr.AsrModel``) for inference, read from
its weight spec (``spec.Speech``: the feature statistics, the front end, the mask rule, the CTC head's norm, the
memory's positions).

``AsrEngine(spec, reference)``'s ``encode_frames`` is the model's call with the same outputs: the front end (the
normalisation, then each convolution of stride 2 as one matrix product over windows of frames, ``PackedFrontend``;
the ``conv2d`` front end through ``models.asr_frontend.front_end`` on the spec's tensors), then the encoder as an
``EncoderStack`` read from the spec (rotary positions: the tables made once per call, not per layer; the packed
layer program; the window mask through ``attnkit.attention``), then the CTC head from the spec (with ``ctc_layer``
k, on layer k's output through the spec's ``ctc_norm``; ``ctc_only`` runs only those k layers). The decoder stays
on the reference model: the decoders of ``attnkit.generation`` read the memory this returns. With attention
weights (``need_weights``) or gradients the whole call goes to the reference model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import masks
from ..models.asr import Encoded, check_frames, encoded, encoder_mask
from ..models.asr_frontend import front_end, half, out_lengths
from .encoder import EncoderStack
from .packed import PackedLinear
from .quant_linear import linear_for
from .spec import Linear, ModelSpec, Speech

__all__ = ["AsrEngine", "PackedFrontend"]


class PackedFrontend:
    """A ``conv1d`` front end (``spec.Speech``) as matrix products, time-major throughout: each convolution of
    stride 2 reads windows of k consecutive frames, each window k C contiguous numbers (a strided view of the
    padded frames, no copy), through a ``PackedLinear`` with W (d, k C) and the GELU in the kernel.
    normalised frames (B, T, n_mels), lengths (B,) -> (B, T', d), the same as the module."""

    def __init__(self, speech: Speech):
        if speech.kind != "conv1d":
            raise ValueError(f"PackedFrontend: runs the conv1d front end, got {speech.kind!r}")
        self.kernel, self.pad = speech.convs[0].weight.shape[-1], speech.time_pad
        self.layers = [PackedLinear(Linear(  # (d, C, k) -> (d, k, C) -> (d, k C): a window's order
            c.weight.permute(0, 2, 1).reshape(c.weight.shape[0], -1).contiguous(), c.bias), "gelu")
            for c in speech.convs]

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
    """See the module doc. ``reference``: the model the spec was read from, which answers the calls with attention
    weights or gradients."""

    def __init__(self, spec: ModelSpec, reference):
        if spec.settings.architecture != "asr" or spec.speech is None:
            raise ValueError(f"AsrEngine: needs a speech model's spec, got {spec.settings.architecture!r}")
        self.spec, self.speech, self.reference, self.config = spec, spec.speech, reference, spec.config
        self.encoder = EncoderStack(spec.encoder, spec.settings)
        self.ctc_head = linear_for(spec.output)
        self.frontend = PackedFrontend(spec.speech) if spec.speech.kind == "conv1d" else None

    def convolutions(self, x: Tensor, lengths: Tensor) -> Tensor:
        """The front end on normalised frames x (B, T, n_mels), lengths (B,) -> (B, T', d): conv1d as matrix
        products, conv2d as the module computes it."""
        if self.frontend is not None:
            return self.frontend(x, lengths)
        sp = self.speech
        convs, project = [(c.weight, c.bias) for c in sp.convs], (sp.project.weight, sp.project.bias)
        return front_end(x, lengths, convs, sp.time_pad, project)

    def front(self, frames: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``AsrModel.front``: frames (B, T, n_mels), lengths (B,) -> the encoder's input (B, T', d), steps (B,)."""
        sp = self.speech
        check_frames(frames, lengths, sp.mean.shape[0])
        h = self.convolutions((frames - sp.mean) / sp.std, lengths)
        return h, out_lengths(lengths, len(sp.convs)).clamp(1, h.shape[1])

    def encode_frames(self, frames: Tensor, lengths: Tensor, *, backend: str | None = None,
                      need_weights: bool = False, ctc_only: bool = False) -> Encoded:
        """``AsrModel.encode_frames``: frames (B, T, n_mels), lengths (B,) -> ``Encoded``."""
        if need_weights or torch.is_grad_enabled():
            return self.reference.encode_frames(frames, lengths, backend=backend, need_weights=need_weights,
                                                ctc_only=ctc_only)
        sp = self.speech
        h, steps = self.front(frames, lengths)  # (B, T', d), (B,)
        mask, k, positions = encoder_mask(steps, sp.window), sp.ctc_layers, sp.memory_positions.add
        if sp.ctc_norm is None:  # the CTC head on the encoder's output
            out = self.encoder.run(h, mask, backend)  # (B, T', d)
            return encoded(out, steps, self.ctc_head(out), positions)
        if ctc_only:  # the first k layers only
            return encoded(None, steps, self.ctc_head(sp.ctc_norm(self.encoder.exit_at(h, mask, backend, k))),
                           positions)
        below, out = self.encoder.run(h, mask, backend, tap=k)
        return encoded(out, steps, self.ctc_head(sp.ctc_norm(below)), positions)
