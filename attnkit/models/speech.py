"""Spoken-word classification with truncated self-attention over log-mel frames.

A sentence of speech is many 10 ms frames; truncated self-attention lets frame i look only at
frames i-left .. i+right (``masks.window(left, right)``), combined with ``masks.padding(lengths)``
for the batch. ``window=None`` gives full attention (padding only) for comparison.

frames (B, T, n_mels) -> conv front end (B, T', d) -> Transformer encoder with the mask ->
mean over each utterance's valid frames (B, d) -> logits (B, num_classes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import masks
from ..functional.pooling import masked_mean
from ..nn import Encoder, TransformerConfig
from ..nn.limits import check_fields, ints

__all__ = ["SpeechConfig", "SpeechClassifier", "spec_augment", "warp_frequency"]


def _default_encoder() -> TransformerConfig:
    return TransformerConfig(d_model=96, num_heads=4, d_ff=192, num_encoder_layers=4, num_decoder_layers=0,
                             dropout=0.1, activation="gelu", norm_first=True, positional="sinusoidal",
                             max_len=4096)


@dataclass(frozen=True)
class SpeechConfig:
    """``window``: (left, right) frames each query sees after subsampling, or None for full attention.
    ``subsample``: stride of the convolutional front end (2 halves the frames the encoder sees)."""

    n_mels: int = field(default=40, metadata={"help": "log-mel bins per frame"})
    num_classes: int = field(default=10, metadata={"help": "number of classes"})
    window: tuple[int, int] | None = field(default=(4, 4), metadata={
        "help": "truncated self-attention: (left, right) frames each frame sees after subsampling, or None (full) "
                "for every frame"})
    subsample: int = field(default=1, metadata={
        "help": "stride of the convolutional front end (2 halves the frames the encoder sees)",
        "range": ints(1, 64)})
    encoder: TransformerConfig = field(default_factory=_default_encoder, metadata={"help": "the Transformer encoder"})

    def __post_init__(self):
        check_fields(self)  # the numbers with a metadata["range"]
        for name in ("n_mels", "num_classes", "subsample"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"SpeechConfig: `{name}` must be a positive integer, got {v!r}")
        if self.window is not None:
            w = tuple(self.window)
            if len(w) != 2 or any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in w):
                raise ValueError(f"SpeechConfig: `window` must be (left, right) integers >= 0 or None, "
                                 f"got {self.window!r}")
            object.__setattr__(self, "window", w)
        if isinstance(self.encoder, dict):
            object.__setattr__(self, "encoder", TransformerConfig.from_dict(self.encoder))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["window"] = list(self.window) if self.window is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SpeechConfig:
        d = dict(d)
        if d.get("window") is not None:
            d["window"] = tuple(d["window"])
        return cls(**d)


def spec_augment(x: Tensor, lengths: Tensor, *, time_masks: int = 2, time_width: int = 8, freq_masks: int = 2,
                 freq_width: int = 6, generator: torch.Generator | None = None) -> Tensor:
    """SpecAugment-style masking (zeros) of random time and mel bands. x (B, T, F) -> (B, T, F)."""
    b, t, f = x.shape
    x = x.clone()
    for i in range(b):
        n = max(int(lengths[i]), 1)
        for _ in range(freq_masks):
            w = int(torch.randint(0, freq_width + 1, (1,), generator=generator))
            s = int(torch.randint(0, max(f - w, 1), (1,), generator=generator))
            x[i, :, s:s + w] = 0
        for _ in range(time_masks):
            w = min(int(torch.randint(0, time_width + 1, (1,), generator=generator)), n // 4)
            s = int(torch.randint(0, max(n - w, 1), (1,), generator=generator))
            x[i, s:s + w] = 0
    return x


def warp_frequency(x: Tensor, factors: Tensor) -> Tensor:
    """Each row's frequency axis stretched by its factor (vocal tract length perturbation, Jaitly and Hinton 2013,
    as a stretch of the mel bins): out[b, :, j] = x[b, :, j / factors[b]], linearly interpolated, bins past the
    top reading the top one. x (B, T, F), factors (B,) > 0 -> (B, T, F)."""
    b, t, f = x.shape
    if factors.shape != (b,) or not bool((factors > 0).all()):
        raise ValueError(f"warp_frequency: `factors` must be ({b},) positive numbers, got {tuple(factors.shape)}")
    pos = (torch.arange(f, dtype=torch.float32, device=x.device)[None] / factors[:, None].float()).clamp(max=f - 1)
    lo = pos.floor().long()  # (B, F)
    hi = (lo + 1).clamp(max=f - 1)
    w = (pos - lo).to(x.dtype)[:, None, :]  # (B, 1, F)
    take = lambda idx: x.gather(2, idx[:, None, :].expand(b, t, f))  # noqa: E731  (B, T, F) at bins idx
    return take(lo) * (1 - w) + take(hi) * w


class SpeechClassifier(nn.Module):
    """forward(frames (B, T, n_mels), lengths (B,)) -> logits (B, num_classes)."""

    def __init__(self, config: SpeechConfig = SpeechConfig(), *, device=None, dtype=None):
        super().__init__()
        self.config = config
        d, s = config.encoder.d_model, config.subsample
        fk = {"device": device, "dtype": dtype}
        k = max(3, s + 1)
        self.conv1 = nn.Conv1d(config.n_mels, d, kernel_size=3, padding=1, **fk)  # (B, n_mels, T) -> (B, d, T)
        self.conv2 = nn.Conv1d(d, d, kernel_size=k, stride=s, padding=k // 2, **fk)  # -> (B, d, T')
        self.encoder = Encoder(config.encoder, device=device, dtype=dtype)
        self.head = nn.Linear(d, config.num_classes, **fk)

    def out_lengths(self, lengths: Tensor) -> Tensor:
        """Frames after the front end for input lengths (B,)."""
        s = self.config.subsample
        k = max(3, s + 1)
        return torch.div(lengths + 2 * (k // 2) - k, s, rounding_mode="floor") + 1

    def frontend(self, frames: Tensor, lengths: Tensor) -> Tensor:
        """Two convolutions (the second with stride ``subsample``); frames past each length are zeroed
        before each one, so padding never leaks into a valid frame. (B, T, n_mels) -> (B, T', d)."""
        keep = masks.keep_positions(lengths, frames.shape[1]).unsqueeze(1)  # (B, 1, T)
        h = F.gelu(self.conv1(frames.transpose(1, 2) * keep))  # (B, T, F) -> (B, F, T) -> (B, d, T)
        h = F.gelu(self.conv2(h * keep))  # (B, d, T')
        return h.transpose(1, 2)  # (B, d, T') -> (B, T', d)

    def mask(self, lengths: Tensor) -> masks.Mask:
        pad = masks.padding(lengths)
        if self.config.window is None:
            return pad
        return masks.window(*self.config.window) & pad

    def forward(self, frames: Tensor, lengths: Tensor, *, need_weights: bool = False,
                backend: str | None = None) -> Tensor | tuple[Tensor, tuple[Tensor, ...]]:
        if frames.dim() != 3 or frames.shape[-1] != self.config.n_mels:
            raise ValueError(f"SpeechClassifier: `frames` must have shape (B, T, {self.config.n_mels}), "
                             f"got {tuple(frames.shape)}")
        if lengths.shape != frames.shape[:1]:
            raise ValueError(f"SpeechClassifier: `lengths` must have shape ({frames.shape[0]},), "
                             f"got {tuple(lengths.shape)}")
        h = self.frontend(frames, lengths)  # (B, T', d)
        lens = self.out_lengths(lengths).clamp(1, h.shape[1])  # (B,)
        out = self.encoder(h, self.mask(lens), need_weights=need_weights, backend=backend)
        pooled = masked_mean(out.last_hidden_state, lens)  # (B, T', d) -> (B, d)
        logits = self.head(pooled)
        return (logits, out.attentions) if need_weights else logits
