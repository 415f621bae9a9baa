"""The speech recogniser's front end: convolutions of stride 2 in time, two (``subsample`` 4: 10 ms frames ->
40 ms steps) or three (``subsample`` 8: 80 ms steps, as ESPnet's Conv2dSubsampling8).

- ``conv1d``: over time, every mel bin a channel: (B, n_mels, T) -> (B, d, T/2) -> (B, d, T/4) [-> (B, d, T/8)];
- ``conv2d`` (ESPnet's Conv2dSubsampling): over time and frequency, ``channels`` maps, stride 2 in both:
  (B, 1, T, n_mels) -> (B, C, T/2, n_mels/2) -> (B, C, T/4, n_mels/4) [-> (B, C, T/8, n_mels/8)] -> a linear
  layer to d. A 3-wide kernel in frequency sees the same spectral shape wherever a voice puts it.

Both zero the frames past each utterance's length before each convolution (padding never reaches a real
frame) and pad ``kernel - 1`` frames in time: split around the frame, or all before it when ``causal``
(then step i reads only frames <= subsample * i). Out lengths: T halved, rounding up, once per convolution.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import masks
from .configs.asr import SUBSAMPLES

__all__ = ["Frontend", "half", "out_lengths", "SUBSAMPLES", "time_pad", "front_end"]



def half(lengths: Tensor) -> Tensor:
    """ceil(lengths / 2): frames after one convolution of stride 2."""
    return torch.div(lengths + 1, 2, rounding_mode="floor")


def out_lengths(lengths: Tensor, convolutions: int) -> Tensor:
    """Steps after ``convolutions`` of stride 2 for frame counts (B,): T halved, rounding up, once per convolution."""
    for _ in range(convolutions):
        lengths = half(lengths)
    return lengths


def time_pad(kernel: int, causal: bool) -> tuple[int, int]:
    """Frames of zeros (before, after) each convolution pads in time: kernel - 1 in all."""
    k = kernel
    return (k - 1, 0) if causal else ((k - 1) // 2, k - 1 - (k - 1) // 2)


def _zero_padding(h: Tensor, lengths: Tensor) -> Tensor:
    """h (B, C, T) or (B, C, T, F) with the frames past each row's length set to zero (none at batch 1: nothing to
    multiply)."""
    if not bool((lengths < h.shape[2]).any()):
        return h
    keep = masks.keep_positions(lengths, h.shape[2]).to(h.dtype)  # (B, T)
    return h * (keep[:, None, :] if h.dim() == 3 else keep[:, None, :, None])


def front_end(x: Tensor, lengths: Tensor, convs, pad: tuple[int, int],
              project: tuple[Tensor, Tensor | None] | None = None) -> Tensor:
    """The front end's maths on its tensors (the module's and an engine's alike): x (B, T, n_mels) normalised,
    lengths (B,), ``convs`` [(weight, bias)] of stride 2 (conv1d weights (d, C, k); conv2d (C', C, k, 3), then
    ``project`` (weight (d, C F'), bias)), ``pad`` (before, after) frames in time -> (B, T', d)."""
    conv1d = convs[0][0].dim() == 3
    h = x.transpose(1, 2) if conv1d else x[:, None]  # (B, n_mels, T) or (B, 1, T, F)
    for weight, bias in convs:  # each: time halved; conv1d (B, d, T/2), conv2d (B, C, T/2, F/2)
        h = _zero_padding(h, lengths)
        if conv1d:
            h = F.gelu(F.conv1d(F.pad(h, pad), weight, bias, 2))
        else:
            h = F.gelu(F.conv2d(F.pad(h, (0, 0, *pad)), weight, bias, 2, (0, 1)))
        lengths = half(lengths)
    if conv1d:
        return h.transpose(1, 2)  # (B, d, T') -> (B, T', d)
    b, c, t, f = h.shape
    return F.linear(h.permute(0, 2, 1, 3).reshape(b, t, c * f), *project)  # (B, T', C F') -> (B, T', d)


class Frontend(nn.Module):
    """forward(x (B, T, n_mels) normalised, lengths (B,)) -> (B, T', d)."""

    def __init__(self, n_mels: int, d: int, kernel: int, kind: str = "conv1d", channels: int = 32, *,
                 causal: bool = False, subsample: int = 4, device=None, dtype=None):
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        if subsample not in SUBSAMPLES:
            raise ValueError(f"Frontend: `subsample` must be one of {SUBSAMPLES}, got {subsample!r}")
        self.kind, self.kernel, self.causal = kind, kernel, causal
        n = subsample.bit_length() - 1  # convolutions of stride 2
        if kind == "conv1d":
            sizes = [n_mels] + [d] * n
            convs = [nn.Conv1d(a, b, kernel, stride=2, **fk) for a, b in zip(sizes, sizes[1:])]
        elif kind == "conv2d":
            sizes = [1] + [channels] * n
            convs = [nn.Conv2d(a, b, (kernel, 3), stride=2, padding=(0, 1), **fk) for a, b in zip(sizes, sizes[1:])]
        else:
            raise ValueError(f"Frontend: `kind` must be 'conv1d' or 'conv2d', got {kind!r}")
        for i, conv in enumerate(convs):  # conv1, conv2[, conv3]: the names runs saved before subsample 8 use
            self.add_module(f"conv{i + 1}", conv)
        self.convs = convs
        freq = n_mels
        for _ in range(n):  # conv2d: the frequency bins left, halved (rounding up) by each convolution
            freq = (freq + 1) // 2
        self.proj = nn.Linear(channels * freq, d, **fk) if kind == "conv2d" else None

    def time_pad(self) -> tuple[int, int]:
        """Frames of zeros (before, after) each convolution pads in time: kernel - 1 in all."""
        return time_pad(self.kernel, self.causal)

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        project = None if self.proj is None else (self.proj.weight, self.proj.bias)
        return front_end(x, lengths, [(c.weight, c.bias) for c in self.convs], self.time_pad(), project)
