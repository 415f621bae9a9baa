"""``FeatureConfig``: the log-mel front end's settings (``attnkit.data.audio`` computes the features), in a module
without torch: ``attnkit train speech --help`` and ``train asr --help`` build their ``--n-mels`` from it."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..nn.limits import check_fields, floats, ints

__all__ = ["FeatureConfig", "MAX_FFT"]

# the ranges below bound the work per second of sound (about 5x the defaults' frames, FFTs up to 4096): an hour's
# features, even at the widest settings, in well under a minute and 1 GB
MAX_FFT = 4096  # the largest FFT (16 kHz x 50 ms windows: 800 samples, an FFT of 1024; room for zero padding)


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
    cepstra: int = field(default=0, metadata={
        "help": "cepstral smoothing: keep the first N coefficients of each frame's DCT over the mel bins and return "
                "to the bins (a spectral envelope without the voice's pitch harmonics; 0 = off)",
        "range": ints(0, 1024)})
    normalize: bool = field(default=True, metadata={
        "help": "per-utterance mean / variance normalisation of each mel bin"})

    def __post_init__(self):
        check_fields(self)  # the numbers with a metadata["range"]: every size below follows from them
        if not isinstance(self.normalize, bool):
            raise ValueError(f"FeatureConfig: `normalize` must be true or false, got {self.normalize!r:.80}")
        if self.cepstra > self.n_mels:
            raise ValueError(f"FeatureConfig: `cepstra` ({self.cepstra}) must be at most `n_mels` ({self.n_mels})")
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
