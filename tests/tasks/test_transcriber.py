"""The transcriber's front end on recordings made from test utterances the way a microphone would give them: another
rate (48 and 44.1 kHz), stereo, quieter and louder, a second of silence before and after, a longer pause between
digits, faster and slower, higher and lower, noisier.

No model here hears speech (a trained one takes 12 minutes and more), so these check what the transcriber hands the
model, deterministically: the same features as the original utterance where the change is one the front end undoes
(rate, channels, level), every digit's sound kept and the silences brought back to the training utterances' lengths
where it is one it trims (silence, pauses), and every digit's sound kept where the model has to cope (speed, pitch,
noise). Real FSDD test recordings when the shared data set is there; tones standing in for digits otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from attnkit.data.audio import FeatureConfig, log_mel, resample
from attnkit.data.augment import add_noise, coloured_noise, speed_perturb
from attnkit.data.digits import DigitUtterances, pools
from attnkit.data.fsdd import load_fsdd
from attnkit.data.silence import KEEP_SECONDS, MAX_PAUSE_SECONDS, active_frames, sound_spans, speech_segments
from attnkit.data.sound import read_audio
from attnkit.tasks.asr_sets import SEEDS
from attnkit.tasks.transcriber import Transcriber
from tests.data.test_fsdd import REAL, wav_bytes
from tests.models.test_asr import tiny_asr

pytestmark = pytest.mark.usefixtures("one_thread")
RATE = 8000
LEVEL_DB = -26.4  # about FSDD's training utterances' median speech power (a run records its own)


@pytest.fixture(scope="module", params=["fsdd", "tones"])
def utterances(request, tmp_path_factory):
    if request.param == "fsdd":
        if not REAL.exists():
            pytest.skip("shared FSDD archive not present")
        recs = load_fsdd()
    else:
        root = tmp_path_factory.mktemp("tones")
        t = np.arange(int(0.3 * RATE)) / RATE
        fade = np.minimum(1, np.minimum(t, t[::-1]) / 0.03)  # 30 ms in and out
        for s, who in enumerate(("alice", "bob")):
            for d in range(10):
                for i in range(5):
                    tone = 0.3 * fade * np.sin(2 * np.pi * (300 + 250 * d + 20 * s + i) * t)  # all below 3 kHz
                    (root / f"{d}_{who}_{i}.wav").write_bytes(wav_bytes(tone))
        recs = load_fsdd(root)
    return list(DigitUtterances(pools(recs)["test"], 4, SEEDS["recordings"]))


@pytest.fixture(scope="module")
def tr():
    return Transcriber(tiny_asr(5), {"features": FeatureConfig(n_mels=8).to_dict(), "level_db": LEVEL_DB})


def features(x: np.ndarray):
    return log_mel(x, FeatureConfig())


def close(a, b, tol: float) -> bool:
    n = min(len(a), len(b))
    return abs(len(a) - len(b)) <= 1 and float((a[:n] - b[:n]).abs().mean()) < tol


def kept(x: np.ndarray, sound, least: float = 0.99) -> bool:
    """Whether the parts the front end keeps of ``x`` hold (``least`` of) ``sound``: the spans where the original
    utterance sounds (``sound_spans``), moved to where they are in ``x``."""
    keep = np.zeros(len(x), dtype=bool)
    for a, b in speech_segments(x, RATE):
        keep[a:b] = True
    total = sum(e - s for s, e in sound)
    return sum(int(keep[s:e].sum()) for s, e in sound) >= least * total


def test_another_rate_and_stereo_give_the_features_of_the_original(utterances, tr, tmp_path):
    for k, u in enumerate(utterances):
        want = features(tr.clean(u.samples))
        for rate in (48000, 44100, 16000):
            path = tmp_path / f"{k}_{rate}.wav"
            soundfile.write(path, resample(u.samples, RATE, rate), rate, subtype="PCM_16")
            x = read_audio(path, RATE)  # what `attnkit transcribe` reads
            assert close(features(tr.clean(x)), want, 0.05), (k, rate)
        stereo = np.stack([u.samples, 0.8 * u.samples], 1)
        assert close(features(tr.clean(tr.at_rate(stereo, RATE))), want, 1e-4)
        assert tr.transcribe_array(resample(u.samples, RATE, 44100), 44100, ctc=True) == \
            tr.transcribe_array(resample(u.samples, RATE, 44100), 44100, ctc=True)


def test_a_quieter_or_louder_recording_gives_the_features_of_the_original(utterances, tr):
    for u in utterances:
        want = features(tr.clean(u.samples))
        for gain in (0.1, 3.0):
            x = np.clip(gain * u.samples, -1, 1)  # a microphone clips: then the sound changed, not only its level
            if float(np.abs(gain * u.samples).max()) <= 1:
                assert close(features(tr.clean(x)), want, 1e-4), gain
        assert not close(features(0.1 * u.samples), features(u.samples), 1e-4) or np.abs(u.samples).max() > 0.5


def test_leading_and_trailing_silence_is_trimmed_and_the_digits_kept(utterances, tr):
    for k, u in enumerate(utterances):
        room = (3e-4 * np.random.default_rng(k).standard_normal(RATE)).astype(np.float32)  # 1 s of a quiet room
        x = np.concatenate([room, u.samples, room[::-1]])
        assert kept(x, [(RATE + s, RATE + e) for s, e in sound_spans(u.samples, RATE)], least=1.0)
        y = tr.clean(x)
        assert len(y) <= len(u.samples) + 2 * (KEEP_SECONDS * RATE + RATE // 50) < len(x)  # frames of 20 ms


def with_pauses(u, seconds: float) -> tuple[np.ndarray, list[int]]:
    """The utterance with ``seconds`` of its own leading silence inserted in the middle of every pause between
    digits; (the samples, where each insertion went)."""
    gap = np.tile(u.samples[:RATE // 50], int(seconds * 50) + 1)[:int(seconds * RATE)]
    cuts = [(u.spans[k - 1][1] + u.spans[k][0]) // 2 for k in range(1, len(u.spans))]
    parts = np.split(u.samples, cuts)
    return np.concatenate([p for part in parts for p in (part, gap)][:-1]), cuts


def moved(spans, cuts: list[int], by: int) -> list[tuple[int, int]]:
    """Spans of the original moved past the insertions of ``by`` samples at ``cuts``."""
    return [(s + by * sum(c <= s for c in cuts), e + by * sum(c <= s for c in cuts)) for s, e in spans]


def longest_pause(x: np.ndarray) -> float:
    """Seconds between the two furthest-apart neighbouring active frames."""
    active, hop = active_frames(x, RATE)
    return float((np.diff(active).max() - 1) * hop / RATE) if len(active) > 1 else 0.0


def test_a_longer_pause_between_digits_is_shortened_and_the_digits_kept(utterances, tr):
    for u in utterances:
        if len(u.digits) < 2:
            continue
        x, cuts = with_pauses(u, 0.5)
        assert kept(x, moved(sound_spans(u.samples, RATE), cuts, int(0.5 * RATE)), least=1.0)
        assert longest_pause(tr.clean(x)) <= MAX_PAUSE_SECONDS + 0.03 < longest_pause(x)


def pitch_shift(x: np.ndarray, semitones: float) -> np.ndarray:
    """``x`` roughly higher or lower by ``semitones``, as long: 40 ms grains, each read 2^(semitones / 12) times as
    fast, overlapped and added at half a grain (granular synthesis; Hann grains at half overlap sum to one)."""
    factor, grain, hop = 2 ** (semitones / 12), RATE // 25, RATE // 50
    window, out = np.hanning(grain + 1)[:grain], np.zeros(len(x))
    for start in range(0, len(x) - grain, hop):
        read = start + np.arange(grain) * factor
        out[start:start + grain] += window * np.interp(read, np.arange(len(x)), x)
    return out.astype(np.float32)


@pytest.mark.parametrize("change", ["rate 0.85", "rate 1.15", "pitch +2", "pitch -2", "noise 20 dB"])
def test_faster_slower_higher_lower_and_noisier_keep_every_digit(utterances, tr, change):
    for k, u in enumerate(utterances):
        spans = sound_spans(u.samples, RATE)
        if change.startswith("rate"):
            factor = float(change.split()[1])
            x = speed_perturb(u.samples, factor)
            spans = [(int(s / factor), min(len(x), int(e / factor))) for s, e in spans]
        elif change.startswith("pitch"):
            x = pitch_shift(u.samples, float(change.split()[1]))
        else:
            x = add_noise(u.samples, coloured_noise(len(u.samples), 0.0, np.random.default_rng(k)), 20.0, RATE)
        assert kept(x, spans), (change, k)
        text = tr.transcribe_array(x, RATE, ctc=True)
        assert all(w.isdigit() for w in text.split())
