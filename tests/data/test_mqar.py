"""MQAR generated with a seed: every answer is the value its key had in the pairs, files round-trip, bad
settings are refused in one line naming the option."""

import numpy as np
import pytest

from attnkit.data.mqar import BLANK, IGNORE, MQARConfig, generate_mqar, read_mqar, write_mqar

CFG = MQARConfig(seq_len=64, num_pairs=8, vocab_size=40, n_train=50, n_val=5, n_test=7, seed=3)


def test_answers_are_the_values_of_the_asked_keys():
    for tokens, targets in generate_mqar(CFG).values():
        for row, answer in zip(tokens.tolist(), targets.tolist()):
            pairs = dict(zip(row[0:16:2], row[1:16:2]))  # key id -> value id, read from the context
            assert len(pairs) == 8 and all(2 <= k < 2 + CFG.num_keys for k in pairs)
            assert all(CFG.first_value <= v < CFG.vocab_size for v in pairs.values())
            asked = [i for i, y in enumerate(answer) if y != IGNORE]
            assert len(asked) == 8 and min(asked) >= 16
            assert sorted(row[i] for i in asked) == sorted(pairs)  # every key asked once
            for i in asked:
                assert answer[i] == pairs[row[i]] - CFG.first_value
            others = [t for i, t in enumerate(row[16:], 16) if i not in asked]
            assert others == [BLANK] * (64 - 16 - 8)


def test_same_seed_same_data_other_seed_other_data():
    a, b = generate_mqar(CFG), generate_mqar(CFG)
    assert all(np.array_equal(a[s][i], b[s][i]) for s in a for i in (0, 1))
    c = generate_mqar(MQARConfig(**{**CFG.__dict__, "seed": 4}))
    assert not np.array_equal(a["train"][0], c["train"][0])
    assert [a[s][0].shape for s in ("train", "val", "test")] == [(50, 64), (5, 64), (7, 64)]


def test_answers_spread_over_the_values_and_places():
    tokens, targets = generate_mqar(MQARConfig(seq_len=128, num_pairs=4, vocab_size=22, n_train=2000, n_val=1,
                                               n_test=1))["train"]
    answers = targets[targets != IGNORE]
    counts = np.bincount(answers, minlength=10)
    assert len(counts) == 10 and counts.min() > 0.8 * counts.mean()  # 10 values, about uniform
    places = np.nonzero(targets != IGNORE)[1]
    assert places.min() == 8 and places.max() == 127  # queries anywhere after the pairs


def test_files_round_trip_and_bad_files_are_named(tmp_path):
    splits = generate_mqar(CFG)
    paths = write_mqar(splits, tmp_path)
    assert [p.name for p in paths] == ["mqar_train.npz", "mqar_val.npz", "mqar_test.npz"]
    tokens, targets = read_mqar(paths[0])
    assert np.array_equal(tokens, splits["train"][0]) and np.array_equal(targets, splits["train"][1])
    np.savez(tmp_path / "bad.npz", tokens=np.zeros((2, 4), np.int64), targets=np.zeros((2, 4), np.int64))
    with pytest.raises(ValueError, match="bad.npz holds tokens int64"):
        read_mqar(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError, match="attnkit lra generate mqar"):
        read_mqar(tmp_path / "missing.npz")


@pytest.mark.parametrize("changes, message", [
    ({"num_pairs": 22}, r"22 pairs and their 22 queries take 66 tokens, more than `seq_len`=64"),
    ({"vocab_size": 12}, r"`vocab_size`=12 holds 5 keys, too few for 8 distinct keys \(`num_pairs`\).*at least 18"),
    ({"seq_len": -4}, r"^mqar: `seq_len` must be an integer in \[3, 65536\], got -4$"),
    ({"num_pairs": 0}, r"`num_pairs` must be an integer in \[1, 21845\]"),
    ({"n_train": 2.5}, r"`n_train` must be an integer in \[1, 10000000\], got 2.5"),
    ({"vocab_size": 40_000}, r"`vocab_size` must be an integer in \[6, 32767\], got 40000"),
])
def test_impossible_settings_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        MQARConfig(**{**CFG.__dict__, **changes})
