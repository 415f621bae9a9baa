"""Waveform augmentation: speed perturbation moves a tone's pitch and length by the factor, coloured noise has the
slope asked for, noise is added at the SNR asked for against the speech (not the silences), a synthetic room decays
by 60 dB in its RT60, and every draw comes from the generator given."""

from __future__ import annotations

import numpy as np
import pytest

from attnkit.data.augment import (
    DRR_DB,
    add_noise,
    coloured_noise,
    reverberate,
    room_impulse_response,
    speed_perturb,
)
from attnkit.data.silence import speech_power

RATE = 8000


def tone(freq: float, seconds: float = 1.0, amp: float = 0.5) -> np.ndarray:
    return (amp * np.sin(2 * np.pi * freq * np.arange(int(seconds * RATE)) / RATE)).astype(np.float32)


def peak_hz(x: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spectrum) * RATE / len(x))


@pytest.mark.parametrize("factor", [0.9, 1.1, 0.85, 1.15])
def test_speed_perturbation_scales_length_and_pitch_by_the_factor(factor):
    x = tone(500.0)
    y = speed_perturb(x, factor)
    assert y.dtype == np.float32 and abs(len(y) - len(x) / factor) <= 1
    assert abs(peak_hz(y) - 500.0 * factor) < 3.0  # the tone is `factor` times as high
    np.testing.assert_array_equal(speed_perturb(x, 1.0), x)
    with pytest.raises(ValueError, match="`factor` must be in"):
        speed_perturb(x, 0.1)


def band_power(x: np.ndarray, low: float, high: float) -> float:
    f = np.fft.rfftfreq(len(x), 1 / RATE)
    p = np.abs(np.fft.rfft(x)) ** 2
    return float(p[(f >= low) & (f < high)].mean())


def test_coloured_noise_has_unit_rms_and_the_slope_asked_for():
    for exponent in (0.0, 1.0, 2.0):
        n = coloured_noise(40000, exponent, np.random.default_rng(0))
        assert n.shape == (40000,) and abs(float(np.sqrt(np.mean(n.astype(np.float64) ** 2))) - 1) < 1e-5
        ratio_db = 10 * np.log10(band_power(n, 100, 200) / band_power(n, 1600, 3200))  # 4 octaves apart
        assert abs(ratio_db - 10 * np.log10(16) * exponent) < 2.5, (exponent, ratio_db)  # 3 dB / octave per unit
    a, b = (coloured_noise(1000, 1.0, np.random.default_rng(7)) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, coloured_noise(1000, 1.0, np.random.default_rng(8)))
    assert coloured_noise(0, 1.0, np.random.default_rng(0)).shape == (0,)


def test_noise_is_added_at_the_snr_against_the_speech_not_the_silence():
    x = np.concatenate([np.zeros(RATE, np.float32), tone(300.0, 0.5, 0.4), np.zeros(RATE, np.float32)])
    assert abs(speech_power(x, RATE) - 0.4 ** 2 / 2) < 1e-3  # the tone's power; the 2 s of silence do not count
    assert speech_power(np.zeros(800, np.float32), RATE) == 0.0
    noise = coloured_noise(len(x), 0.0, np.random.default_rng(1))
    for snr in (0.0, 10.0, 20.0):
        y = add_noise(x, noise, snr, RATE)
        added = y.astype(np.float64) - x
        assert abs(10 * np.log10(speech_power(x, RATE) / np.mean(added ** 2)) - snr) < 0.01
    with pytest.raises(ValueError, match="`noise` must have the shape"):
        add_noise(x, noise[:10], 10.0, RATE)


def test_a_synthetic_room_decays_by_60_db_in_its_rt60():
    for rt60 in (0.1, 0.3, 0.6):
        h = room_impulse_response(rt60, RATE, np.random.default_rng(0))
        assert h.shape == (int(rt60 * RATE),) and h[0] == 1.0
        tail = h[1:].astype(np.float64)
        drr = 10 * np.log10(1.0 / np.sum(tail ** 2))
        assert DRR_DB[0] - 1e-6 <= drr <= DRR_DB[1] + 1e-6
        tenth = len(tail) // 10
        first, last = np.mean(tail[:tenth] ** 2), np.mean(tail[-tenth:] ** 2)
        assert 45 < 10 * np.log10(first / last) < 65  # 60 dB from start to end, less a tenth at each side
    np.testing.assert_array_equal(room_impulse_response(0.3, RATE, np.random.default_rng(5)),
                                  room_impulse_response(0.3, RATE, np.random.default_rng(5)))
    with pytest.raises(ValueError, match="`rt60` must be in"):
        room_impulse_response(0.0, RATE, np.random.default_rng(0))


def test_reverberation_keeps_the_length_and_level_and_smears_the_sound():
    x = np.concatenate([tone(400.0, 0.3), np.zeros(RATE // 2, np.float32)])
    y = reverberate(x, room_impulse_response(0.5, RATE, np.random.default_rng(2)))
    assert y.shape == x.shape and y.dtype == np.float32
    assert abs(np.sqrt(np.mean(y.astype(np.float64) ** 2)) - np.sqrt(np.mean(x.astype(np.float64) ** 2))) < 1e-4
    after = slice(int(0.3 * RATE) + 80, int(0.4 * RATE))  # the 100 ms after the tone stops: the room still rings
    assert np.all(x[after] == 0) and np.sqrt(np.mean(y[after] ** 2)) > 0.01
    np.testing.assert_array_equal(reverberate(x, np.array([1.0], np.float32)), x)
