"""A run's utterance sets with synthetic voices: the training set mixes them in at their share, dev and test never
hold them, and the unheard voices' test set needs no FSDD (the synthesiser stood in for by tones here)."""

from __future__ import annotations

import numpy as np
import pytest

from attnkit.data import synthetic_voices
from attnkit.data.digits import DigitsConfig
from attnkit.data.fsdd import Recording
from attnkit.tasks import asr_sets
from tests.data.test_fsdd import write_set

pytestmark = pytest.mark.usefixtures("one_thread")


def fake_voices(n: int, pool: str = "train", *, takes: int = 10, each=None) -> list[Recording]:
    """Tones standing in for the voices' recordings: one per digit and take, the voice's names as the real ones."""
    out = []
    for v in synthetic_voices.voices(n, pool):
        for t in range(takes):
            out += [Recording(f"{d}_{v.name}_{t}.wav", d, v.name, t,
                              (0.3 * np.sin(np.arange(2400) * (0.05 + 0.01 * d))).astype(np.float32))
                    for d in range(10)]
        if each is not None:
            each(v)
    return out


@pytest.fixture
def meta(tmp_path, monkeypatch):
    monkeypatch.setattr(synthetic_voices, "recordings", fake_voices)
    write_set(tmp_path / "fsdd" / "recordings", speakers=("alice", "bob"), digits=range(10), indices=range(11))
    return {"digits": DigitsConfig().to_dict(), "holdout_speaker": None, "dev_speaker": None, "train_seed": 3,
            "utterances": {"train": 400, "dev": 20, "test": 30},
            "tts": {"voices": 3, "share": 0.75, "takes": 2, "engine": "eSpeak NG test"}}, tmp_path


def test_the_training_set_mixes_the_voices_in_at_their_share(meta):
    meta, root = meta
    sets = asr_sets.make_sets(meta, ("train", "dev", "recordings"), root=root, bars=False)
    speakers = [u.speaker for u in sets["train"]]
    synthetic = sum(s.startswith("tts") for s in speakers)
    assert set(speakers) == {"alice", "bob", "tts00", "tts01", "tts02"}
    assert 0.68 < synthetic / len(speakers) < 0.82, synthetic  # 0.75 expected
    assert all(s in ("alice", "bob") for name in ("dev", "recordings") for s in (u.speaker for u in sets[name]))
    assert {src.split("_")[2] for u in sets["train"] if u.speaker.startswith("tts") for src in u.sources} <= {
        "0.wav", "1.wav"}  # the run's takes
    same = asr_sets.make_sets(meta, ("train",), root=root, bars=False)["train"]
    assert all(np.array_equal(same[i].samples, sets["train"][i].samples) for i in (0, 7, 99))
    plain = asr_sets.make_sets({**meta, "tts": None}, ("train",), root=root, bars=False)["train"]
    assert {u.speaker for u in plain} == {"alice", "bob"}
    assert asr_sets.report_names(meta) == ("recordings", "tts") and asr_sets.report_names({}) == ("recordings",)


def test_the_unheard_voices_need_no_fsdd(meta):
    meta, _ = meta
    (tts,) = asr_sets.make_sets(meta, ("tts",), root="/nowhere", bars=False).values()
    assert len(tts) == 30 and {u.speaker for u in tts} <= {f"unheard{i:02d}" for i in range(asr_sets.EVAL_VOICES)}
    assert len({u.speaker for u in tts}) > 5
    assert asr_sets.title(meta, "tts") == f"synthetic voices never heard ({asr_sets.EVAL_VOICES} voices)"


def test_mixed_speakers_reach_the_training_set_only(meta):
    meta, root = meta
    meta = {**meta, "tts": None, "mix_speakers": 1.0}
    sets = asr_sets.make_sets(meta, ("train", "dev", "recordings"), root=root, bars=False)
    voices = [{src.split("_")[1] for src in u.sources} for u in sets["train"]]
    assert sum(len(v) > 1 for v in voices) > 0.5 * len(voices)  # two speakers: most utterances mix them
    for name in ("dev", "recordings"):  # one voice per utterance, as before
        assert all(len({src.split("_")[1] for src in u.sources}) == 1 for u in sets[name])
    plain = asr_sets.make_sets({**meta, "mix_speakers": 0.0}, ("dev",), root=root, bars=False)["dev"]
    assert [u.sources for u in plain] == [u.sources for u in sets["dev"]]
