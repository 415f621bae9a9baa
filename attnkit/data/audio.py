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
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from .features import MAX_FFT, FeatureConfig

__all__ = ["FeatureConfig", "read_wav", "log_mel", "cepstral_smoother", "resample", "MAX_FFT"]

STFT_CELLS = 1 << 21  # complex STFT values computed at once (16 MB): memory bounded whatever the settings


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


@lru_cache(maxsize=8)
def cepstral_smoother(n_mels: int, keep: int) -> Tensor:
    """(n_mels, n_mels) projection P: frames @ P keeps the first ``keep`` coefficients of each frame's orthonormal
    DCT-II over its mel bins (the cepstrum's low quefrencies: the spectral envelope) and drops the rest (the fine
    ripple of a voice's pitch harmonics). P = D_k^T D_k, D_k the DCT's first ``keep`` rows (keep, n_mels)."""
    m = torch.arange(n_mels, dtype=torch.float64)
    k = torch.arange(keep, dtype=torch.float64)[:, None]
    dct = torch.cos(math.pi / n_mels * (m + 0.5) * k) * math.sqrt(2 / n_mels)  # (keep, n_mels)
    dct[0] /= math.sqrt(2)  # orthonormal: row 0 has norm 1
    return (dct.T @ dct).float()  # (n_mels, n_mels), symmetric


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
    if config.cepstra:
        feats = feats @ cepstral_smoother(config.n_mels, config.cepstra)  # (T, n_mels)
    if config.normalize:
        feats = (feats - feats.mean(0)) / (feats.std(0, unbiased=False) + 1e-5)
    return feats
