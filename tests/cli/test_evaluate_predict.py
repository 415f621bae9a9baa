"""``evaluate`` without --data scores each task's standard split; ``predict`` takes raw text and split items."""

from __future__ import annotations

import json
import shutil

import numpy as np
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
    for figures, files in (("html", ["attention_0.html", "lecture_0.html"]), ("png", ["attention_0.png"])):
        maps = tmp_path / f"maps_{figures}"
        assert main(["predict", str(out), "I saw a saw.", "--attention", str(maps), "--figures", figures]) == 0
        assert sorted(p.name for p in maps.iterdir()) == files
        assert capsys.readouterr().out.splitlines()[-1] == "wrote " + " and ".join(str(maps / f) for f in files)
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


def test_classifier_predict_splits_raw_text_as_its_training_data_and_names_labels(tmp_path, capsys):
    """SST-2's text has its punctuation apart ("great , moving film ."): raw input is split the same way, so
    "film." and "great," are the known words "film", "." and "great", ","; the label prints with its name."""
    from attnkit.tasks import classifier

    sst2 = tmp_path / "data" / "sst2"
    sst2.mkdir(parents=True)
    for split, n in (("train", 64), ("dev", 8)):
        rows = [f"{'a great , moving' if i % 2 else 'a dull , tired'} film . \t{i % 2}" for i in range(n)]
        (sst2 / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "classifier", "--data-dir", str(tmp_path / "data"), "--out", str(out), "--epochs", "3",
                 "--batch-size", "8", "--lr", "3e-3", "--warmup-steps", "0", *TINY]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "A great, moving film.", "A dull, tired film.", "--attention",
                 str(tmp_path / "maps")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("positive (label 1, p=") and lines[0].endswith("\tA great, moving film.")
    assert lines[2].startswith("negative (label 0, p=")
    from attnkit.viz import read_attention_html

    page = read_attention_html(tmp_path / "maps" / "attention_0.html")
    assert page["queries"] == ["a", "great", ",", "moving", "film", "."]  # every word known, none "great,"
    m = {"dataset": "sst2", "lowercase": True}  # a run from before the split was recorded: SST-2's rule
    assert classifier.tokenize("Isn't it \"good\"?", m, raw=True) == ["is", "n't", "it", "``", "good", "''", "?"]
    assert classifier.tokenize("it 's good", m) == ["it", "'s", "good"]  # a data file's text: as written
    assert classifier.text_split(["a film.", "good, fun"]) == "spaces"
    assert classifier.text_split(["a film .", "good , fun"]) == "treebank"
    assert classifier.tokenize("good, fun.", {"split": "spaces"}, raw=True) == ["good,", "fun."]
    assert classifier.label_name({"labels": ["pos"]}, "pos") == "pos"


def test_predict_draws_a_fine_tuned_encoders_attention_over_its_word_pieces(tmp_path, capsys):
    """--attention with a tagger fine-tuned from a pretrained encoder: every layer over the encoder's own pieces
    ([CLS] i saw a saw [SEP]), the page and the lecture page (it used to write nothing, silently)."""
    from attnkit.viz import read_attention_html
    from attnkit.viz.lecture import read_lecture_html
    from tests.pretrained.test_loader import make_folder

    folder = make_folder(tmp_path / "tiny")  # a 2-layer BERT of width 8
    tr = _grammar_conllu(tmp_path / "train.conllu", 16, 0)
    out = tmp_path / "run"
    assert main(["train", "tagger", "--train", str(tr), "--dev", str(tr), "--pretrained", str(folder),
                 "--out", str(out), "--max-steps", "2", "--batch-size", "8", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "I saw a saw", "--attention", str(tmp_path / "maps")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("I/") and "attention_0.png" in printed and "lecture_0.html" in printed
    page = read_attention_html(tmp_path / "maps" / "attention_0.html")
    assert page["queries"] == ["[CLS]", "i", "saw", "a", "saw", "[SEP]"] and page["weights"].shape[:2] == (2, 2)
    lecture = read_lecture_html(tmp_path / "maps" / "lecture_0.html")
    np.testing.assert_allclose(explain_weights(lecture), page["weights"], atol=2e-4)  # the same attention


def explain_weights(d) -> np.ndarray:
    """softmax(q k^T * scale) of a lecture page's stored q, k: (layers, heads, L, L)."""
    s = np.einsum("nhid,nhjd->nhij", d["q"], d["k"]) * d["scale"]
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
