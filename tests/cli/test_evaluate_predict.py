"""``evaluate`` without --data scores each task's standard split; ``predict`` takes raw text and split items."""

from __future__ import annotations

import json
import shutil

import pytest

from attnkit.cli.main import main
from tests.cli.test_train_cli import TINY, _grammar_conllu
from tests.data.test_fsdd import write_set

pytestmark = pytest.mark.usefixtures("one_thread")


def test_tagger_defaults_to_ewt_test_and_splits_raw_text(tmp_path, capsys):
    ewt = tmp_path / "data" / "ud_english_ewt"  # a stand-in for UD English EWT under --data-dir
    ewt.mkdir(parents=True)
    for split, n, seed in (("train", 120, 0), ("dev", 20, 1), ("test", 25, 2)):
        _grammar_conllu(ewt / f"en_ewt-ud-{split}.conllu", n, seed)
    out = tmp_path / "run"
    assert main(["train", "tagger", "--data-dir", str(tmp_path / "data"), "--out", str(out), "--epochs", "6",
                 "--batch-size", "8", "--lr", "3e-3", "--warmup-steps", "10", *TINY]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data-dir", str(tmp_path / "data")]) == 0  # no --data: EWT test
    captured = capsys.readouterr()
    text = captured.out
    assert captured.err == ""  # stderr is not a terminal: no progress bar
    n_words = sum(1 for line in (ewt / "en_ewt-ud-test.conllu").read_text().splitlines() if line[:1].isdigit())
    assert f"examples scored: {n_words} " in text and "accuracy: 1.0000" in text
    # raw text: the final period is a word of its own, as in the treebank
    assert main(["predict", str(out), "I saw a saw.", "They need the tree."]) == 0
    assert capsys.readouterr().out.splitlines() == ["I/PRON saw/VERB a/DET saw/NOUN ./PUNCT",
                                                    "They/PRON need/VERB the/DET tree/NOUN ./PUNCT"]
    # a run trained on other files has no standard split: a clear error
    custom = tmp_path / "custom"
    shutil.copytree(out, custom)
    for path in custom.glob("ckpt-*/meta.json"):
        meta = json.loads(path.read_text())
        path.write_text(json.dumps({**meta, "dataset": None, "train_file": "mine.conllu"}))
    assert main(["evaluate", str(custom), "--data-dir", str(tmp_path / "data")]) == 1
    assert "not UD English EWT; give the file to score with --data FILE.conllu" in capsys.readouterr().err


def test_classifier_defaults_to_sst2_dev(tmp_path, capsys):
    sst2 = tmp_path / "data" / "sst2"
    sst2.mkdir(parents=True)
    for split, n in (("train", 60), ("dev", 12)):
        rows = [f"{'great' if i % 2 else 'dull'} film {i}\t{i % 2}" for i in range(n)]
        (sst2 / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "classifier", "--data-dir", str(tmp_path / "data"), "--out", str(out), "--epochs", "1",
                 "--batch-size", "16", *TINY]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data-dir", str(tmp_path / "data")]) == 0
    assert "examples scored: 12 " in capsys.readouterr().out
    assert main(["evaluate", str(out), "--dtype", "bfloat16"]) == 1  # a weights' dtype for translation runs only
    assert "--dtype bfloat16 applies to translation runs" in capsys.readouterr().err
    other = tmp_path / "other"
    assert main(["train", "classifier", "--train", str(sst2 / "train.tsv"), "--out", str(other), "--epochs", "1",
                 *TINY]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(other)]) == 1
    assert "not trained on SST-2" in capsys.readouterr().err


def test_speech_predict_takes_split_items(tmp_path, capsys):
    write_set(tmp_path / "fsdd" / "recordings", digits=(0, 1), indices=range(7))
    out = tmp_path / "run"
    assert main(["train", "speech", "--data-dir", str(tmp_path), "--epochs", "1", "--batch-size", "8",
                 "--d-model", "16", "--num-heads", "2", "--d-ff", "32", "--num-encoder-layers", "1", "--n-mels", "16",
                 "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "test:0", "train:3", "--data-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the official split: index 0-4 is test, sorted by name; train starts at index 5
    assert lines[0].startswith("test:0 (0_alice_0.wav, true label 0): ")
    assert lines[1].startswith("train:3 (0_bob_6.wav, true label 0): ")  # 0_alice_5, 0_alice_6, 0_bob_5, 0_bob_6
    assert main(["predict", str(out), "test:99", "--data-dir", str(tmp_path)]) == 1
    assert "the test split has 20 recordings (0 to 19)" in capsys.readouterr().err
    assert main(["predict", str(out), "test:x", "--data-dir", str(tmp_path)]) == 1
    assert "expected test:N" in capsys.readouterr().err
