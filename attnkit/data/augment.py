"""Waveform augmentation for training a speech recogniser: speed perturbation, additive noise, reverberation.

Every function takes samples (S,) and, where it draws anything, a ``numpy.random.Generator`` its caller owns (a
training run seeds one per utterance from its seed, the epoch and the utterance, so ``--resume`` draws the same);
each returns float32 samples.

- ``speed_perturb(x, factor)``: the signal resampled by 1 / factor, pitch and tempo together (Kaldi's and
  ESPnet's speed perturbation, factors 0.9, 1.0 and 1.1), by ``scipy.signal.resample_poly`` at the exact ratio
  (0.9: up 10, down 9);
- ``coloured_noise(n, exponent, rng)``: Gaussian noise whose power falls as 1 / f^exponent (0 white, 1 pink,
  2 brown), unit RMS;
- ``add_noise(x, noise, snr_db, rate)``: noise scaled to a signal-to-noise ratio against the speech's power
  (``attnkit.data.silence.speech_power``: silences do not count);
- ``room_impulse_response(rt60, rate, rng)``: a synthetic room: the direct path, then Gaussian noise decaying by
  60 dB in ``rt60`` seconds (Polack's statistical model of late reverberation), at a direct-to-reverberant ratio
  drawn from ``DRR_DB``;
- ``reverberate(x, rir)``: the convolution, cut to the input's length, its RMS kept.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .silence import speech_power

__all__ = ["speed_perturb", "coloured_noise", "add_noise", "room_impulse_response", "reverberate", "SPEED_FACTORS",
           "DRR_DB"]

SPEED_FACTORS = (0.9, 1.0, 1.1)  # Kaldi's and ESPnet's recipes
DRR_DB = (0.0, 10.0)  # direct-to-reverberant ratio of a synthetic room, dB (low, high)


def speed_perturb(x: np.ndarray, factor: float) -> np.ndarray:
    """Samples (S,) -> about S / factor samples: the same sound ``factor`` times as fast (and as high)."""
    from scipy.signal import resample_poly

    if not 0.25 <= factor <= 4:
        raise ValueError(f"speed_perturb: `factor` must be in [0.25, 4], got {factor!r}")
    ratio = Fraction(factor).limit_denominator(1000)  # output / input length = 1 / factor = den / num
    if ratio == 1:
        return np.asarray(x, dtype=np.float32)
    return resample_poly(np.asarray(x, dtype=np.float32), ratio.denominator, ratio.numerator).astype(np.float32)


def coloured_noise(n: int, exponent: float, rng: np.random.Generator) -> np.ndarray:
    """(n,) Gaussian noise with power spectrum proportional to 1 / f^exponent, scaled to unit RMS."""
    import scipy.fft

    if n <= 0:
        return np.zeros(0, dtype=np.float32)
    size = scipy.fft.next_fast_len(n, real=True)
    bins = size // 2 + 1
    spectrum = rng.standard_normal(bins) + 1j * rng.standard_normal(bins)
    f = np.arange(bins, dtype=np.float64)
    f[0] = 1.0  # no infinite power at 0 Hz: the lowest bin takes the next one's
    y = scipy.fft.irfft(spectrum * f ** (-exponent / 2), size)[:n]
    y -= y.mean()
    rms = float(np.sqrt(np.mean(y ** 2)))
    return (y / rms if rms > 0 else y).astype(np.float32)


def add_noise(x: np.ndarray, noise: np.ndarray, snr_db: float, rate: int) -> np.ndarray:
    """x + noise scaled so that speech_power(x) / its power is ``snr_db`` dB; x and noise (S,) alike."""
    if noise.shape != x.shape:
        raise ValueError(f"add_noise: `noise` must have the shape of `x`, {x.shape}, got {noise.shape}")
    power = speech_power(x, rate)
    noise_power = float(np.mean(np.square(noise, dtype=np.float64)))
    if power <= 0 or noise_power <= 0:
        return np.asarray(x, dtype=np.float32)
    scale = np.sqrt(power / noise_power / 10 ** (snr_db / 10))
    return (x + scale * noise).astype(np.float32)


def room_impulse_response(rt60: float, rate: int, rng: np.random.Generator) -> np.ndarray:
    """A synthetic room's impulse response (rt60 s long, at least 2 samples): 1 (the direct path), then noise decaying
    by 60 dB over ``rt60`` seconds, its energy below the direct path's by a ratio drawn from ``DRR_DB``."""
    if not 0 < rt60 <= 10:
        raise ValueError(f"room_impulse_response: `rt60` must be in (0, 10] seconds, got {rt60!r}")
    n = max(2, int(rt60 * rate))
    t = np.arange(1, n) / rate
    tail = rng.standard_normal(n - 1) * 10 ** (-3 * t / rt60)  # amplitude -60 dB at rt60
    drr = rng.uniform(*DRR_DB)
    tail *= np.sqrt(10 ** (-drr / 10) / max(float(np.sum(tail ** 2)), 1e-30))
    return np.concatenate(([1.0], tail)).astype(np.float32)


def reverberate(x: np.ndarray, rir: np.ndarray) -> np.ndarray:
    """x convolved with the impulse response ``rir``, its first len(x) samples, at x's RMS."""
    from scipy.signal import oaconvolve

    if len(x) == 0:
        return np.asarray(x, dtype=np.float32)
    y = oaconvolve(np.asarray(x, dtype=np.float64), np.asarray(rir, dtype=np.float64))[:len(x)]
    before, after = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))), float(np.sqrt(np.mean(y ** 2)))
    return (y * (before / after) if after > 0 else y).astype(np.float32)
