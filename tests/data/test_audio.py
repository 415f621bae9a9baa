"""Cepstral smoothing of the log-mel features (``FeatureConfig.cepstra``)."""

import numpy as np
import pytest
import torch

from attnkit.data.audio import cepstral_smoother, log_mel
from attnkit.data.features import FeatureConfig


@pytest.mark.parametrize("n, k", [(40, 13), (24, 1), (16, 16), (5, 3)])
def test_the_smoother_is_a_projection_onto_the_first_k_cosines(n, k):
    p = cepstral_smoother(n, k).double()
    assert torch.allclose(p, p.T, atol=1e-6) and torch.allclose(p @ p, p, atol=1e-6)
    assert torch.linalg.matrix_rank(p, atol=1e-4).item() == k
    bins = torch.arange(n, dtype=torch.float64)
    slow = torch.cos(np.pi / n * (bins + 0.5) * (k - 1))  # the last cosine kept passes unchanged
    assert torch.allclose(slow @ p, slow, atol=1e-5)
    if k < n:  # the next one is removed
        fast = torch.cos(np.pi / n * (bins + 0.5) * k)
        assert (fast @ p).abs().max() < 1e-5


def _voiced(pitch: float, seconds: float = 0.5, rate: int = 8000) -> np.ndarray:
    """A pulse train at ``pitch`` Hz through a two-formant resonance: harmonics under an envelope."""
    t = np.arange(int(seconds * rate)) / rate
    harmonics = sum(np.cos(2 * np.pi * pitch * h * t) for h in range(1, int(3800 / pitch)))
    envelope = np.exp(-np.arange(200) / 20.0) * np.cos(2 * np.pi * 700 * np.arange(200) / rate)
    return (np.convolve(harmonics, envelope)[: t.size] / 50).astype(np.float32)


def test_smoothing_takes_out_the_pitch_ripple_between_two_voices():
    """Two voices with the same envelope and pitches 110 / 220 Hz: their mean log-mel frames differ by the
    harmonics' ripple across the low bins, which 13 cepstra remove, and by what stays: the 220 Hz voice has no
    energy below its fundamental (1.72 -> 1.15 here)."""
    raw, smooth = FeatureConfig(normalize=False), FeatureConfig(normalize=False, cepstra=13)
    low, high = _voiced(110), _voiced(220)
    gap = [(log_mel(low, c).mean(0) - log_mel(high, c).mean(0)).std().item() for c in (raw, smooth)]
    assert gap[1] < 0.75 * gap[0], gap
    same = log_mel(low, smooth)
    assert torch.allclose(same, log_mel(low, raw) @ cepstral_smoother(40, 13), atol=1e-4)


def test_cepstra_above_the_mel_bins_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"`cepstra` \(41\) must be at most `n_mels` \(40\)"):
        FeatureConfig(cepstra=41)
