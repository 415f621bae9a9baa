"""Synthetic voices: drawn from their pool's seed, the train and eval pools never sharing a variant; recordings at
8 kHz with the digit's speech in them, the same every time, made once and then read from the cache."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnkit.data import synthetic_voices as sv
from attnkit.data.espeak import Say, find_engine, synthesise
from attnkit.data.silence import speech_power
from tests.markers import needs_espeak


def test_voices_are_drawn_from_the_pool_seed_and_the_pools_share_no_variant():
    assert not set(sv.TRAIN_VARIANTS) & set(sv.EVAL_VARIANTS)
    train, evaluation = sv.voices(40, "train"), sv.voices(20, "eval")
    assert sv.voices(5, "train") == train[:5] and sv.voices(40, "train") == train  # voice i whatever n
    assert [v.name for v in train[:3]] == ["tts00", "tts01", "tts02"] and evaluation[7].name == "unheard07"
    assert not {v.variant for v in train} & {v.variant for v in evaluation}
    assert len({v.variant for v in train[:len(sv.TRAIN_VARIANTS)]}) == len(sv.TRAIN_VARIANTS)  # distinct at first
    assert len({v.accent for v in train}) > 4 and {v.accent for v in train} <= set(sv.ACCENTS)
    for v in train + evaluation:
        assert 20 <= v.pitch <= 80 and 20 <= v.range <= 80 and 140 <= v.rate <= 205 and -30 <= v.level_db <= -22
    assert len({(v.pitch, v.rate) for v in train}) > 35
    assert sv.voices(0) == []
    with pytest.raises(ValueError, match="`pool` must be one of"):
        sv.voices(2, "test")
    with pytest.raises(ValueError, match="`n` must be a whole number >= 0"):
        sv.voices(-1)


@needs_espeak
def test_every_accent_and_variant_is_in_the_installed_synthesiser():
    said = [Say(f"{a}+{sv.TRAIN_VARIANTS[0]}", "one", 175, 50, 50) for a in sv.ACCENTS]
    said += [Say(f"gmw/en+{v}", "one", 175, 50, 50) for v in sv.TRAIN_VARIANTS + sv.EVAL_VARIANTS]
    _, waves = synthesise(said, find_engine())
    assert all(np.abs(w).max() > 1000 for w in waves)


@needs_espeak
def test_recordings_are_8khz_speech_the_same_every_time_and_cached(tmp_path, monkeypatch):
    voice = sv.voices(2, "eval")[1]
    recs = sv.voice_recordings(voice, takes=2, cache=tmp_path / "a")
    assert [(r.digit, r.index) for r in recs] == [(d, t) for t in range(2) for d in range(10)]
    assert recs[13].name == "3_unheard01_1.wav" and {r.speaker for r in recs} == {"unheard01"}
    for r in recs:
        x = r.samples
        assert x.dtype == np.float32 and 0.15 * sv.RATE < len(x) < 1.2 * sv.RATE, (r.name, len(x))
        head, tail = (float(np.mean(part ** 2)) for part in (x[:int(0.01 * sv.RATE)], x[-int(0.05 * sv.RATE):]))
        assert max(head, tail) < speech_power(x, sv.RATE) / 1000, r.name  # silence before and after the sound
        assert abs(10 * np.log10(speech_power(x, sv.RATE)) - voice.level_db) < 0.5
    assert not np.array_equal(recs[0].samples[:1000], recs[10].samples[:1000])  # takes differ
    again = sv.voice_recordings(voice, takes=2, cache=tmp_path / "b")  # made again from nothing: the same
    assert all(np.array_equal(a.samples, b.samples) for a, b in zip(recs, again))
    (manifest,) = (tmp_path / "a").glob("*.json")
    about = json.loads(manifest.read_text())
    assert about["voice"]["name"] == "unheard01" and about["synthesiser"] == str(find_engine())
    assert len(about["says"]) == 20 and not list((tmp_path / "a").glob("*.part"))

    def no_synthesis(*a, **k):
        raise AssertionError("synthesised again despite the cache")

    monkeypatch.setattr(sv, "synthesise", no_synthesis)
    cached = sv.voice_recordings(voice, takes=2, cache=tmp_path / "a")
    assert all(np.array_equal(a.samples, b.samples) for a, b in zip(recs, cached))
    with pytest.raises(AssertionError, match="synthesised again"):  # other settings: another key
        sv.voice_recordings(voice, takes=3, cache=tmp_path / "a")
    manifest.with_suffix(".npz").write_bytes(b"not an npz")  # a damaged file is made again, not read
    with pytest.raises(AssertionError, match="synthesised again"):
        sv.voice_recordings(voice, takes=2, cache=tmp_path / "a")
    with pytest.raises(ValueError, match="`takes` must be a whole number in"):
        sv.voice_recordings(voice, takes=0, cache=tmp_path / "a")


@needs_espeak
def test_recordings_of_several_voices_report_each(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path))
    seen = []
    recs = sv.recordings(2, "train", takes=1, each=seen.append)
    assert [v.name for v in seen] == ["tts00", "tts01"] and len(recs) == 20
    assert len(list((tmp_path / "tts").glob("*.npz"))) == 2  # the download cache's tts folder
    assert sv.recordings(0) == []
