"""Connected-digit utterances: deterministic from the seed, test recordings never in training utterances."""

from __future__ import annotations

import numpy as np
import pytest

from attnkit.data.digits import DigitsConfig, DigitUtterances, pools, write_set
from attnkit.data.fsdd import load_fsdd
from attnkit.tasks.asr_sets import read_tsv
from tests.data.test_fsdd import write_set as write_recordings

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def recs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fsdd") / "recordings"
    write_recordings(folder, speakers=("alice", "bob", "carol"), digits=range(10), indices=range(12))
    return load_fsdd(folder.parent)


def test_utterances_are_made_from_the_seed_alone(recs):
    pool = pools(recs)["train"]
    a, b = DigitUtterances(pool, 20, seed=7), DigitUtterances(pool, 5, seed=7)
    for i in range(5):  # item i does not depend on the set's size or on the items made before it
        np.testing.assert_array_equal(a[i].samples, b[i].samples)
        assert a[i].digits == b[i].digits and a[i].sources == b[i].sources
    np.testing.assert_array_equal(a[3].samples, a[3].samples)
    other = DigitUtterances(pool, 20, seed=8)
    assert [u.digits for u in a] != [u.digits for u in other]
    u = a[0]
    assert u.samples.dtype == np.float32 and np.abs(u.samples).max() <= 1.0
    assert 1 <= len(u.digits) <= 7 and u.transcript == " ".join(map(str, u.digits))
    assert len(u.spans) == len(u.digits) and all(0 <= s < e <= len(u.samples) for s, e in u.spans)
    assert all(u.spans[k][1] <= u.spans[k + 1][0] for k in range(len(u.spans) - 1))  # pauses between digits
    assert {v.speaker for v in a} <= {"alice", "bob", "carol"}
    for v in a:  # one speaker per utterance, each digit from a recording of that digit
        assert all(src.split("_")[1] == v.speaker for src in v.sources)
        assert [int(src[0]) for src in v.sources] == list(v.digits)
    lengths = {len(v.digits) for v in DigitUtterances(pool, 100, seed=1)}
    assert lengths == set(range(1, 8))


def test_no_test_recording_is_in_a_training_utterance(recs):
    p = pools(recs)
    names = {k: {r.name for r in v} for k, v in p.items()}
    assert not (names["train"] & names["test"]) and not (names["train"] & names["dev"])
    assert {r.index for r in p["test"]} == set(range(5)) and {r.index for r in p["dev"]} == set(range(5, 10))
    used = {s for u in DigitUtterances(p["train"], 60, seed=0) for s in u.sources}
    assert used and not used & names["test"] and not used & names["dev"]
    held = pools(recs, "bob")
    assert {r.speaker for r in held["test_speaker"]} == {"bob"} and len(held["test_speaker"]) == 10 * 12
    assert "bob" not in {r.speaker for k in ("train", "dev", "test") for r in held[k]}
    used = {s for u in DigitUtterances(held["train"], 60, seed=0) for s in u.sources}
    assert not any("_bob_" in s for s in used)
    with pytest.raises(ValueError, match="unknown speaker 'dave'"):
        pools(recs, "dave")


def test_config_is_checked():
    with pytest.raises(ValueError, match="`min_digits` \\(5\\) exceeds `max_digits` \\(3\\)"):
        DigitsConfig(min_digits=5, max_digits=3)
    with pytest.raises(ValueError, match="`speed` must satisfy"):
        DigitsConfig(speed=(1.2, 0.8))
    cfg = DigitsConfig(pause_ms=(10, 20))
    assert DigitsConfig.from_dict(cfg.to_dict()) == cfg


def test_write_set_round_trips(recs, tmp_path):
    utts = DigitUtterances(pools(recs)["test"], 4, seed=3, config=DigitsConfig(speed=(1.0, 1.0), snr_db=(200, 200)))
    tsv = write_set(utts, tmp_path / "set")
    wavs, refs = read_tsv(tsv)
    assert refs == [list(u.digits) for u in utts] and [w.name for w in wavs] == [f"0000{i}.wav" for i in range(4)]
    from attnkit.data.audio import read_wav

    x, rate = read_wav(wavs[1])
    assert rate == 8000 and np.abs(x - utts[1].samples).max() < 1e-4  # 16-bit PCM of the samples
    (tmp_path / "bad.tsv").write_text("path\ttranscript\na.wav\tseven\n")
    with pytest.raises(ValueError, match=r"bad\.tsv, line 2: expected a WAV path"):
        read_tsv(tmp_path / "bad.tsv")


def test_speakers_drawn_by_weight(recs):
    pool = pools(recs)["train"]
    uniform = DigitUtterances(pool, 30, seed=4)
    same = DigitUtterances(pool, 30, seed=4, weights=None)
    assert [u.speaker for u in uniform] == [u.speaker for u in same]  # no weights: the draws of before
    counts = {s: 0 for s in ("alice", "bob", "carol")}
    for u in DigitUtterances(pool, 600, seed=4, weights={"alice": 3, "bob": 1, "carol": 0}):
        counts[u.speaker] += 1
    assert counts["carol"] == 0 and 0.68 < counts["alice"] / 600 < 0.82, counts  # 3/4 expected
    weighted = DigitUtterances(pool, 30, seed=4, weights={"alice": 1, "bob": 1, "carol": 1})
    assert [u.digits for u in weighted] == [u.digits for u in DigitUtterances(pool, 30, seed=4, weights={
        "alice": 2, "bob": 2, "carol": 2})]  # only the ratios count
    for bad, words in (({"alice": 1, "bob": 1}, "must name each speaker"), ({"alice": 1, "bob": 1, "carol": -1},
                                                                           "finite numbers >= 0"),
                       ({"alice": 0, "bob": 0, "carol": 0}, "not all 0")):
        with pytest.raises(ValueError, match=words):
            DigitUtterances(pool, 3, seed=0, weights=bad)


def test_mixed_speakers_change_only_the_voices(recs):
    pool = pools(recs)["train"]
    plain = DigitUtterances(pool, 200, seed=5)
    assert [u.sources for u in DigitUtterances(pool, 200, seed=5, mix=0.0)] == [u.sources for u in plain]
    mixed = DigitUtterances(pool, 200, seed=5, mix=1.0)
    voices = [{src.split("_")[1] for src in u.sources} for u in mixed]
    several = [len(v) > 1 for u, v in zip(mixed, voices, strict=True) if len(u.digits) >= 4]
    assert sum(several) / len(several) > 0.8  # 4+ digits from 3 speakers drawn anew: one voice in 27^-1 or less
    for u in mixed:  # still each digit from a recording of that digit
        assert [int(src[0]) for src in u.sources] == list(u.digits)
    half = DigitUtterances(pool, 400, seed=5, mix=0.5)
    other = sum(src.split("_")[1] != u.speaker for u in half for src in u.sources)
    total = sum(len(u.digits) for u in half)
    assert 0.25 < other / total < 0.42, other / total  # drawn anew half the time, another speaker 2/3 of those
    with pytest.raises(ValueError, match="`mix` must be a number in \\[0, 1\\]"):
        DigitUtterances(pool, 3, seed=0, mix=1.5)
