"""The speech recogniser's front end: two convolutions of stride 2 in time, 10 ms frames -> 40 ms steps.

- ``conv1d``: over time, every mel bin a channel: (B, n_mels, T) -> (B, d, T/2) -> (B, d, T/4);
- ``conv2d`` (ESPnet's Conv2dSubsampling): over time and frequency, ``channels`` maps, stride 2 in both:
  (B, 1, T, n_mels) -> (B, C, T/2, n_mels/2) -> (B, C, T/4, n_mels/4) -> a linear layer to d. A 3-wide
  kernel in frequency sees the same spectral shape wherever a voice puts it.

Both zero the frames past each utterance's length before each convolution (padding never reaches a real
frame) and pad ``kernel - 1`` frames in time: split around the frame, or all before it when ``causal``
(then step i reads only frames <= 4 i). Out lengths: ceil(ceil(T / 2) / 2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import masks

__all__ = ["Frontend", "half"]


def half(lengths: Tensor) -> Tensor:
    """ceil(lengths / 2): frames after one convolution of stride 2."""
    return torch.div(lengths + 1, 2, rounding_mode="floor")


class Frontend(nn.Module):
    """forward(x (B, T, n_mels) normalised, lengths (B,)) -> (B, T', d)."""

    def __init__(self, n_mels: int, d: int, kernel: int, kind: str = "conv1d", channels: int = 32, *,
                 causal: bool = False, device=None, dtype=None):
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        self.kind, self.kernel, self.causal = kind, kernel, causal
        if kind == "conv1d":
            self.conv1 = nn.Conv1d(n_mels, d, kernel, stride=2, **fk)
            self.conv2 = nn.Conv1d(d, d, kernel, stride=2, **fk)
            self.proj = None
        elif kind == "conv2d":
            self.conv1 = nn.Conv2d(1, channels, (kernel, 3), stride=2, padding=(0, 1), **fk)
            self.conv2 = nn.Conv2d(channels, channels, (kernel, 3), stride=2, padding=(0, 1), **fk)
            freq = (n_mels + 1) // 2
            self.proj = nn.Linear(channels * ((freq + 1) // 2), d, **fk)
        else:
            raise ValueError(f"Frontend: `kind` must be 'conv1d' or 'conv2d', got {kind!r}")

    def _time_pad(self) -> tuple[int, int]:
        k = self.kernel
        return (k - 1, 0) if self.causal else ((k - 1) // 2, k - 1 - (k - 1) // 2)

    def _conv(self, conv: nn.Module, h: Tensor, lengths: Tensor, time_dim: int) -> Tensor:
        if bool((lengths < h.shape[time_dim]).any()):  # padding to zero (none at batch 1: nothing to multiply)
            keep = masks.keep_positions(lengths, h.shape[time_dim]).to(h.dtype)  # (B, T)
            h = h * (keep[:, None, :] if time_dim == 2 and h.dim() == 3 else keep[:, None, :, None])
        before, after = self._time_pad()
        pad = (before, after) if h.dim() == 3 else (0, 0, before, after)
        return F.gelu(conv(F.pad(h, pad)))

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        if self.kind == "conv1d":
            h = self._conv(self.conv1, x.transpose(1, 2), lengths, 2)  # (B, n_mels, T) -> (B, d, T/2)
            h = self._conv(self.conv2, h, half(lengths), 2)  # -> (B, d, T')
            return h.transpose(1, 2)  # (B, T', d)
        h = self._conv(self.conv1, x[:, None], lengths, 2)  # (B, 1, T, F) -> (B, C, T/2, F/2)
        h = self._conv(self.conv2, h, half(lengths), 2)  # -> (B, C, T', F/4)
        b, c, t, f = h.shape
        return self.proj(h.permute(0, 2, 1, 3).reshape(b, t, c * f))  # (B, T', C, F') -> (B, T', C F') -> (B, T', d)
