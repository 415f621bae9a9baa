"""Where the speech is in a recording: leading and trailing silence trimmed, long pauses shortened, its level.

A recording made for transcription rarely looks like a training utterance: a second of silence before the first
digit, a long pause between two, a quiet room or a noisy one. ``speech_segments`` finds the parts to keep from the
energy of 20 ms frames every 10 ms:

- the **noise floor** is the 10th percentile of the frames' energy and the loudest frame the **peak**; a frame is
  **active** when its energy is above floor + 30% of (peak - floor), both in dB. A recording whose peak is less than
  12 dB above its floor (all speech, all noise, a tone) is kept whole;
- everything from ``keep`` seconds before the first active frame to ``keep`` after the last one is kept, and each
  run of inactive frames inside longer than ``max_pause`` seconds is shortened to ``max_pause`` (its middle cut
  out).

The defaults follow the training utterances (``attnkit.data.digits``: 50-300 ms before and after, 50-400 ms between
digits). Only silence goes: noise, another speed or pitch are the model's to cope with.

``speech_power`` is the mean power of the 20 ms frames within 30 dB of the loudest one (silences do not count), and
``set_level`` scales a recording to a speech power: a speech recogniser's transcriber brings every recording to its
training utterances' typical level, so a quiet or a loud microphone gives the features it was trained on.
"""

from __future__ import annotations

import numpy as np

__all__ = ["speech_segments", "trim_silence", "frame_energy_db", "active_frames", "sound_spans", "speech_power",
           "set_level", "KEEP_SECONDS", "MAX_PAUSE_SECONDS"]

KEEP_SECONDS = 0.25  # silence kept before the first and after the last active frame
MAX_PAUSE_SECONDS = 0.4  # a pause between two active frames is shortened to this
CONTRAST_DB = 12.0  # below this between floor and peak, nothing is trimmed
ACTIVE_SHARE = 0.3  # an active frame is above floor + this share of (peak - floor), in dB
FRAME_SECONDS = 0.02  # frames over which speech_power finds the speech
ACTIVE_DB = 30.0  # speech_power: frames within this many dB of the loudest count as speech


def frame_energy_db(x: np.ndarray, rate: int) -> tuple[np.ndarray, int]:
    """(energy in dB of the 20 ms frame starting every 10 ms, the hop in samples)."""
    hop, win = max(1, rate // 100), max(1, rate // 50)
    if len(x) < win:
        return np.zeros(0), hop
    total = np.concatenate(([0.0], np.cumsum(np.square(x, dtype=np.float64))))  # running sums: linear time
    energy = (total[win:] - total[:-win])[::hop] / win
    return 10 * np.log10(np.maximum(energy, 1e-12)), hop


def active_frames(x: np.ndarray, rate: int) -> tuple[np.ndarray, int] | None:
    """(indices of the active frames, the hop) of ``x`` (S,): frames louder than the noise floor by ``ACTIVE_SHARE``
    of the floor-to-peak contrast; None when the contrast is under ``CONTRAST_DB`` (no clear silence)."""
    db, hop = frame_energy_db(x, rate)
    if len(db) == 0:
        return None
    floor, peak = float(np.percentile(db, 10)), float(db.max())
    if peak - floor < CONTRAST_DB:
        return None
    return np.flatnonzero(db > floor + ACTIVE_SHARE * (peak - floor)), hop


def sound_spans(x: np.ndarray, rate: int) -> list[tuple[int, int]]:
    """The (start, end) samples of each run of active frames of ``x`` (S,); [(0, S)] without clear silence."""
    found = active_frames(x, rate)
    if found is None:
        return [(0, len(x))]
    active, hop = found
    win = max(1, rate // 50)
    breaks = np.flatnonzero(np.diff(active) > 1)
    starts, ends = np.concatenate(([0], breaks + 1)), np.concatenate((breaks, [len(active) - 1]))
    return [(int(active[a]) * hop, min(len(x), int(active[b]) * hop + win)) for a, b in zip(starts, ends)]


def speech_segments(x: np.ndarray, rate: int, *, keep: float = KEEP_SECONDS,
                    max_pause: float = MAX_PAUSE_SECONDS) -> list[tuple[int, int]]:
    """The (start, end) sample spans of ``x`` (S,) to keep, in order (the module docstring); [(0, S)] when there is no
    clear speech against silence."""
    found = active_frames(x, rate)
    if found is None:
        return [(0, len(x))]
    active, hop = found
    win = max(1, rate // 50)
    first, last = int(active[0]) * hop, int(active[-1]) * hop + win
    spans, start = [], max(0, first - int(keep * rate))
    gaps = np.flatnonzero(np.diff(active) * hop > max_pause * rate + win)  # inactive runs longer than max_pause
    for g in gaps:
        quiet_from, quiet_to = int(active[g]) * hop + win, int(active[g + 1]) * hop  # the pause's samples
        half = int(max_pause * rate) // 2
        spans.append((start, quiet_from + half))
        start = quiet_to - (int(max_pause * rate) - half)
    spans.append((start, min(len(x), last + int(keep * rate))))
    return spans


def trim_silence(x: np.ndarray, rate: int, *, keep: float = KEEP_SECONDS,
                 max_pause: float = MAX_PAUSE_SECONDS) -> np.ndarray:
    """``x`` (S,) with its ``speech_segments`` only, joined: leading and trailing silence trimmed to ``keep`` seconds,
    pauses longer than ``max_pause`` shortened to it."""
    spans = speech_segments(x, rate, keep=keep, max_pause=max_pause)
    if spans == [(0, len(x))]:
        return x
    return np.concatenate([x[a:b] for a, b in spans])


def speech_power(x: np.ndarray, rate: int) -> float:
    """Mean power of the 20 ms frames within 30 dB of the loudest one (0 for silence)."""
    hop = max(1, int(FRAME_SECONDS * rate))
    usable = len(x) // hop * hop
    if usable == 0:
        return float(np.mean(np.square(x, dtype=np.float64))) if len(x) else 0.0
    power = np.square(x[:usable], dtype=np.float64).reshape(-1, hop).mean(1)
    top = float(power.max())
    if top <= 0:
        return 0.0
    return float(power[power >= top * 10 ** (-ACTIVE_DB / 10)].mean())


def set_level(x: np.ndarray, rate: int, level_db: float) -> np.ndarray:
    """``x`` (S,) scaled so that its ``speech_power`` is ``level_db`` dB (of a full-scale power of 1); silence as it
    is."""
    power = speech_power(x, rate)
    if power <= 0:
        return x
    return (x * np.sqrt(10 ** (level_db / 10) / power)).astype(np.float32)
