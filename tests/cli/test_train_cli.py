"""End-to-end CLI runs on small generated data with tiny models."""

import json
import random

import numpy as np
import pytest

from attnkit.cli.main import main
from attnkit.viz import read_attention_html

TINY = ["--d-model", "32", "--num-heads", "2", "--d-ff", "64", "--num-encoder-layers", "1", "--no-progress",
        "--log-every", "5"]


def _grammar_conllu(path, n, seed):
    """Sentences PRON VERB DET NOUN [PUNCT] where 'saw' is both a verb and a noun."""
    rng = random.Random(seed)
    pron, verb, det, noun = ["I", "you", "we", "they"], ["saw", "need", "like", "see"], ["a", "the"], \
        ["saw", "dog", "cat", "tree", "need"]
    lines = []
    for s in range(n):
        words = [(rng.choice(pron), "PRON"), (rng.choice(verb), "VERB"), (rng.choice(det), "DET"),
                 (rng.choice(noun), "NOUN")] + ([(".", "PUNCT")] if rng.random() < 0.5 else [])
        lines.append(f"# sent_id = {s}")
        for i, (w, t) in enumerate(words, 1):
            lines.append(f"{i}\t{w}\t{w}\t{t}\t_\t_\t0\tdep\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_tagger_train_evaluate_predict_resume(tmp_path, capsys):
    tr, dev = _grammar_conllu(tmp_path / "train.conllu", 120, 0), _grammar_conllu(tmp_path / "dev.conllu", 30, 1)
    out = tmp_path / "run"
    args = ["train", "tagger", "--train", str(tr), "--dev", str(dev), "--test", str(dev), "--out", str(out),
            "--epochs", "6", "--batch-size", "8", "--lr", "3e-3", "--warmup-steps", "10", *TINY]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "test accuracy: 1.0000" in text
    assert (out / "curves.png").exists() and (out / "metrics.jsonl").exists()
    assert main(["predict", str(out), "I saw a saw", "--attention", str(tmp_path / "maps")]) == 0
    text = capsys.readouterr().out
    assert "I/PRON saw/VERB a/DET saw/NOUN" in text
    assert (tmp_path / "maps" / "attention_0.png").exists()
    page = read_attention_html(tmp_path / "maps" / "attention_0.html")
    assert page["queries"] == ["I", "saw", "a", "saw"] and page["title"] == "I/PRON saw/VERB a/DET saw/NOUN"
    w = np.array(page["weights"])  # (layers, heads, 4, 4), each row a distribution
    assert w.shape[2:] == (4, 4) and np.allclose(w.sum(-1), 1.0, atol=1e-3)
    assert main(["evaluate", str(out), "--data", str(dev)]) == 0
    assert "accuracy: 1.0000" in capsys.readouterr().out
    # an unknown label at evaluation: a clear message naming the file and line
    bad = tmp_path / "bad.conllu"
    bad.write_text(dev.read_text().replace("\tNOUN\t", "\tNOTATAG\t", 1), encoding="utf-8")
    assert main(["evaluate", str(out), "--data", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.conllu:5: label 'NOTATAG' is not in the model's label set" in err
    # resuming a finished run is a no-op that reports the same result
    assert main([*args, "--resume"]) == 0


def test_malformed_training_file_is_an_error_not_a_traceback(tmp_path, capsys):
    tr = _grammar_conllu(tmp_path / "train.conllu", 5, 0)
    tr.write_text(tr.read_text().replace("\tVERB\t", " VERB ", 1), encoding="utf-8")
    assert main(["train", "tagger", "--train", str(tr), "--out", str(tmp_path / "r"), *TINY]) == 1
    assert "train.conllu:3:" in capsys.readouterr().err


def test_image_digits_train_predict_and_wrong_task(tmp_path, capsys):
    out = tmp_path / "img"
    assert main(["train", "image", "--dataset", "digits", "--out", str(out), "--max-steps", "30",
                 "--batch-size", "32", "--eval-every", "30", *TINY]) == 0
    res = json.loads((out / "result.json").read_text())
    assert res["step"] == 30 and res["test"]["count"] == 360
    assert main(["predict", str(out), "test:0", "--attention", str(tmp_path / "maps")]) == 0
    assert "test:0 (true label" in capsys.readouterr().out
    assert (tmp_path / "maps" / "attention_0.png").exists()
    meta = json.loads((out / "latest.json").read_text())
    folder = out / meta["path"]
    m = json.loads((folder / "meta.json").read_text())
    m["task"] = "speech-from-the-future"
    (folder / "meta.json").write_text(json.dumps(m))
    assert main(["evaluate", str(folder), "--data", "test"]) == 1
    assert "which this attnkit does not know" in capsys.readouterr().err


def test_bad_options_are_clear_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:  # outside its range: refused while parsing, one line
        main(["train", "image", "--out", str(tmp_path / "x"), *TINY, "--lr", "-1"])
    assert e.value.code == 2
    assert capsys.readouterr().err == ("attnkit train image: error: argument --lr: must be a number in (0, 10], got "
                                       "'-1' (see attnkit train image --help)\n")
    assert main(["train", "image", "--out", str(tmp_path / "x"), *TINY, "--d-model", "30", "--num-heads", "4"]) == 1
    assert "divisible" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_an_unknown_choice_is_refused_when_parsing(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "image", "--out", str(tmp_path / "x"), *TINY, "--schedule", "nope"])
    assert e.value.code == 2
    assert "argument --schedule: invalid choice: 'nope'" in capsys.readouterr().err


def test_classifier_learns_keywords_and_predicts(tmp_path, capsys):
    rng = random.Random(0)
    pos, neg, filler = ["great", "lovely", "superb"], ["awful", "dull", "boring"], ["a", "film", "the", "plot", "is"]

    def tsv(path, n):
        rows = ["sentence\tlabel"]
        for _ in range(n):
            y = rng.random() < 0.5
            words = rng.sample(filler, 3) + [rng.choice(pos if y else neg)]
            rng.shuffle(words)
            rows.append(" ".join(words) + " \t" + str(int(y)))
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        return path

    tr, dev = tsv(tmp_path / "train.tsv", 200), tsv(tmp_path / "dev.tsv", 40)
    out = tmp_path / "cls"
    assert main(["train", "classifier", "--train", str(tr), "--dev", str(dev), "--test", str(dev), "--out", str(out),
                 "--epochs", "5", "--batch-size", "16", "--lr", "3e-3", "--warmup-steps", "5", "--word-dropout",
                 "0", *TINY]) == 0
    assert "test accuracy: 1.0000" in capsys.readouterr().out
    assert main(["predict", str(out), "the plot is superb", "a dull film", "--attention", str(tmp_path / "m")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("1 (p=") and lines[2].startswith("0 (p=")
    assert lines[1].endswith("attention_0.png and " + str(tmp_path / "m" / "attention_0.html"))
    page = read_attention_html(tmp_path / "m" / "attention_1.html")
    assert page["title"] == lines[2] and "dull" in page["queries"]
    assert np.array(page["weights"]).shape[2:] == (len(page["queries"]),) * 2
    assert main(["evaluate", str(out), "--data", str(dev)]) == 0
    bad = tmp_path / "bad.tsv"
    bad.write_text("great film \t2\n", encoding="utf-8")
    assert main(["evaluate", str(out), "--data", str(bad)]) == 1
    assert "bad.tsv:1: label '2' is not in the model's label set" in capsys.readouterr().err
