"""Reading PCM WAV files and log-mel features (25 ms windows every 10 ms by default).

The STFT is ``torch.stft``; the mel filterbank is ``librosa.filters.mel`` (the ``speech`` extra), so no
filterbank is written by hand. A recording at another sample rate is resampled with ``soxr`` (a
librosa dependency, in the same extra; it imports in a fraction of scipy.signal's time); a recording
with more than one channel is refused with an error naming the file (mix it down first).
"""

from __future__ import annotations

import io
import math
import os
import wave
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from ..nn.limits import check_fields, floats, ints

__all__ = ["FeatureConfig", "read_wav", "log_mel", "resample", "MAX_FFT"]

# the ranges below bound the work per second of sound (about 5x the defaults' frames, FFTs up to 4096): an hour's
# features, even at the widest settings, in well under a minute and 1 GB
MAX_FFT = 4096  # the largest FFT (16 kHz x 50 ms windows: 800 samples, an FFT of 1024; room for zero padding)
STFT_CELLS = 1 << 21  # complex STFT values computed at once (16 MB): memory bounded whatever the settings


@dataclass(frozen=True)
class FeatureConfig:
    """Log-mel front end. ``n_fft`` defaults to the next power of two >= the window length."""

    sample_rate: int = field(default=8000, metadata={
        "help": "audio sample rate in Hz (recordings are resampled to it; an hour at 16 kHz is 230 MB)",
        "range": ints(1000, 16000)})
    n_mels: int = field(default=40, metadata={"help": "log-mel bins per frame", "range": ints(1, 1024)})
    win_ms: float = field(default=25.0, metadata={"help": "analysis window length in milliseconds",
                                                  "range": floats(5, 50)})
    hop_ms: float = field(default=10.0, metadata={"help": "step between frames in milliseconds (at most win_ms)",
                                                  "range": floats(5, 50)})
    n_fft: int = field(default=0, metadata={"help": "FFT size (0 = the next power of two >= the window length)",
                                            "range": ints(0, MAX_FFT)})
    normalize: bool = field(default=True, metadata={
        "help": "per-utterance mean / variance normalisation of each mel bin"})

    def __post_init__(self):
        check_fields(self)  # the numbers with a metadata["range"]: every size below follows from them
        if not isinstance(self.normalize, bool):
            raise ValueError(f"FeatureConfig: `normalize` must be true or false, got {self.normalize!r:.80}")
        if self.hop_ms > self.win_ms:
            raise ValueError(f"FeatureConfig: `hop_ms` ({self.hop_ms}) must be at most `win_ms` ({self.win_ms})")
        if self.n_fft and self.n_fft < self.win_length:
            raise ValueError(f"FeatureConfig: `n_fft` ({self.n_fft}) must be >= the window length "
                             f"({self.win_length} samples)")

    @property
    def win_length(self) -> int:
        return int(round(self.sample_rate * self.win_ms / 1000))

    @property
    def hop_length(self) -> int:
        return int(round(self.sample_rate * self.hop_ms / 1000))

    @property
    def fft_size(self) -> int:
        return self.n_fft or 1 << math.ceil(math.log2(self.win_length))

    def num_frames(self, num_samples: int) -> int:
        """Frames produced for a recording of ``num_samples`` samples (centred STFT)."""
        return num_samples // self.hop_length + 1

    def to_dict(self) -> dict:
        return asdict(self)


def resample(x: np.ndarray, orig_sr: int, target_sr: int) -> np.ndarray:
    """Band-limited resampling (soxr, high quality) of a 1-D float signal; returns float32."""
    if orig_sr == target_sr:
        return x.astype(np.float32, copy=False)
    import soxr

    return np.asarray(soxr.resample(x.astype(np.float32), orig_sr, target_sr, quality="HQ"), dtype=np.float32)


def read_wav(source: str | os.PathLike | bytes, *, sample_rate: int | None = 8000, name: str | None = None
             ) -> tuple[np.ndarray, int]:
    """Read a PCM WAV (8/16/32-bit integer) file or its bytes -> (samples float32 in [-1, 1], rate).

    With ``sample_rate`` set, other rates are resampled to it; None keeps the file's rate.
    Raises ValueError naming the file for a non-WAV, a compressed / float WAV or more than one channel.
    """
    label = name or (str(source) if not isinstance(source, bytes) else "<bytes>")
    try:
        with wave.open(io.BytesIO(source) if isinstance(source, bytes) else os.fspath(source), "rb") as w:
            channels, width, rate, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
            raw = w.readframes(n)
    except (wave.Error, EOFError) as e:
        raise ValueError(f"audio: {label} is not a PCM WAV file ({e})") from e
    if channels != 1:
        raise ValueError(f"audio: {label} has {channels} channels; expected mono (1 channel)")
    if width == 1:
        x = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        x = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    elif width == 4:
        x = np.frombuffer(raw, "<i4").astype(np.float32) / 2147483648.0
    else:
        raise ValueError(f"audio: {label} has {8 * width}-bit samples; expected 8, 16 or 32-bit PCM")
    if x.size == 0:
        raise ValueError(f"audio: {label} holds no samples")
    if sample_rate is not None and rate != sample_rate:
        x, rate = resample(x, rate, sample_rate), sample_rate
    return x, rate


@lru_cache(maxsize=8)
def _mel_basis(sample_rate: int, n_fft: int, n_mels: int) -> Tensor:
    from librosa.filters import mel

    return torch.from_numpy(mel(sr=sample_rate, n_fft=n_fft, n_mels=n_mels)).float()  # (n_mels, n_fft//2+1)


@lru_cache(maxsize=8)
def _window(length: int) -> Tensor:
    return torch.hann_window(length)


def log_mel(x: np.ndarray | Tensor, config: FeatureConfig = FeatureConfig()) -> Tensor:
    """Samples (S,) at ``config.sample_rate`` -> log-mel frames (T, n_mels), T = S // hop + 1 (an even FFT).

    A centred STFT (reflected ends), computed ``STFT_CELLS`` values at a time: memory follows the frames kept,
    never the FFT size times the frames."""
    x = torch.as_tensor(x, dtype=torch.float32)
    if x.dim() != 1:
        raise ValueError(f"log_mel: expected samples of shape (S,), got {tuple(x.shape)}")
    n_fft, win, hop = config.fft_size, config.win_length, config.hop_length
    if x.shape[0] < n_fft // 2 + 1:  # reflect padding needs a few samples
        x = torch.nn.functional.pad(x, (0, n_fft // 2 + 1 - x.shape[0]))
    padded = torch.nn.functional.pad(x[None, None], (n_fft // 2, n_fft // 2), mode="reflect")[0, 0]
    frames = 1 + (padded.shape[0] - n_fft) // hop
    basis = _mel_basis(config.sample_rate, n_fft, config.n_mels)  # (n_mels, n_fft//2+1)
    feats = torch.empty(frames, config.n_mels)  # (T, n_mels)
    step = max(1, STFT_CELLS // (n_fft // 2 + 1))
    for a in range(0, frames, step):
        b = min(frames, a + step)
        spec = torch.stft(padded[a * hop:(b - 1) * hop + n_fft], n_fft, hop_length=hop, win_length=win,
                          window=_window(win), center=False, return_complex=True)  # (n_fft//2+1, b - a)
        power = spec.real.square() + spec.imag.square()
        feats[a:b] = torch.log(basis @ power + 1e-6).T
    if config.normalize:
        feats = (feats - feats.mean(0)) / (feats.std(0, unbiased=False) + 1e-5)
    return feats
