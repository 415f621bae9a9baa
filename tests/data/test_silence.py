"""Where the speech is: leading and trailing silence trimmed to 0.25 s, long pauses shortened to 0.4 s, a recording
without clear silence kept whole, and the level set by the speech's power, not the silence's."""

from __future__ import annotations

import numpy as np

from attnkit.data.silence import KEEP_SECONDS, MAX_PAUSE_SECONDS, set_level, speech_power, speech_segments, trim_silence

RATE = 8000


def burst(seconds: float, freq: float = 440.0, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def quiet(seconds: float, level: float = 1e-4, seed: int = 0) -> np.ndarray:
    return (level * np.random.default_rng(seed).standard_normal(int(seconds * RATE))).astype(np.float32)


def contains(y: np.ndarray, part: np.ndarray) -> bool:
    """Whether ``part`` is in ``y`` as a contiguous run of samples."""
    return any(np.array_equal(y[i - 1:i - 1 + len(part)], part) for i in np.flatnonzero(y == part[1]))


def test_leading_and_trailing_silence_is_trimmed_to_keep_seconds():
    x = np.concatenate([quiet(1.0), burst(0.5), quiet(0.2, seed=1), burst(0.4), quiet(1.5, seed=2)])
    (a, b), = speech_segments(x, RATE)
    keep = int(KEEP_SECONDS * RATE)
    assert abs(a - (RATE - keep)) <= RATE // 50 and abs(b - (int(2.1 * RATE) + keep)) <= RATE // 50
    y = trim_silence(x, RATE)
    np.testing.assert_array_equal(y, x[a:b])


def test_a_pause_longer_than_max_pause_is_shortened_and_the_sound_kept():
    first, second = burst(0.3), burst(0.3, 660.0)
    x = np.concatenate([quiet(0.1), first, quiet(1.2, seed=1), second, quiet(0.1, seed=2)])
    spans = speech_segments(x, RATE)
    assert len(spans) == 2
    y = trim_silence(x, RATE)
    assert abs(len(y) - (0.1 + 0.3 + MAX_PAUSE_SECONDS + 0.3 + 0.1) * RATE) <= RATE // 50
    assert contains(y, first) and contains(y, second)  # each burst kept whole, sample for sample
    short = np.concatenate([quiet(0.1), first, quiet(0.3, seed=1), second, quiet(0.1, seed=2)])
    np.testing.assert_array_equal(trim_silence(short, RATE), short)  # 0.3 s pause, 0.1 s edges: nothing to cut


def test_a_recording_without_silence_is_kept_whole():
    for x in (burst(2.0), quiet(2.0), np.zeros(16000, np.float32), np.zeros(40, np.float32), quiet(2.0, 0.3)):
        assert speech_segments(x, RATE) == [(0, len(x))]
        assert trim_silence(x, RATE) is x


def test_the_level_is_set_by_the_speech_not_the_silence():
    x = np.concatenate([quiet(2.0), burst(0.5, amp=0.05), quiet(1.0, seed=1)])
    assert abs(speech_power(x, RATE) - 0.05 ** 2 / 2) < 1e-5
    for level_db in (-30.0, -20.0):
        y = set_level(x, RATE, level_db)
        assert abs(10 * np.log10(speech_power(y, RATE)) - level_db) < 1e-3 and y.dtype == np.float32
        np.testing.assert_allclose(y / y.max(), x / x.max(), rtol=0, atol=1e-6)  # scaled, nothing else
    silent = np.zeros(800, np.float32)
    assert speech_power(silent, RATE) == 0.0 and set_level(silent, RATE, -20.0) is silent
