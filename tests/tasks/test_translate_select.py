"""``attnkit train translate --select``: the dev metric that picks a translation run's best checkpoint."""

import json
import re

import pytest

from attnkit.cli.main import main
from attnkit.train import read_metrics

from .corpus import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--d-model", "32", "--num-heads", "2", "--d-ff", "64", "--num-encoder-layers", "1", "--num-decoder-layers",
        "1", "--no-progress", "--vocab-size", "60", "--batch-tokens", "400", "--warmup-steps", "2", "--average", "0",
        "--max-steps", "4", "--eval-every", "2"]


@pytest.fixture
def corpus(tmp_path):
    c = write_corpus(tmp_path / "corpus", n_train=40, n_dev=5)
    return ["--train-src", str(c["train_src"]), "--train-tgt", str(c["train_tgt"]), "--dev-src", str(c["dev_src"]),
            "--dev-tgt", str(c["dev_tgt"]), *TINY]


@pytest.mark.parametrize("extra,bleu", [
    (["--decoder", "nat", "--nat-loss", "ctc"], True),  # CTC: BLEU by default
    ([], False),  # autoregressive: accuracy by default
    (["--select", "bleu"], True),
])
def test_select_bleu_scores_the_dev_set_at_every_evaluation_and_picks_by_it(tmp_path, corpus, capsys, extra, bleu):
    out = tmp_path / "run"
    assert main(["train", "translate", *corpus, *extra, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    dev = [r for r in read_metrics(out / "metrics.jsonl") if r["split"] == "dev"]
    assert [r["step"] for r in dev] == [2, 4]
    assert all(("bleu" in r) == bleu for r in dev), dev
    best = json.loads((out / "best.json").read_text())
    if bleu:
        assert all(0 <= r["bleu"] <= 100 for r in dev)
        top = max(dev, key=lambda r: r["bleu"])  # the first of equals stays the best
        assert best["step"] == top["step"] and best["metrics"]["bleu"] == top["bleu"]
        assert re.search(r"best dev bleu: [0-9.]+ \(accuracy [0-9.]+\) at step", said), said
    else:
        assert best["step"] == max(dev, key=lambda r: r["accuracy"])["step"]


def test_select_bleu_without_dev_pairs_is_one_line(tmp_path, capsys):
    c = write_corpus(tmp_path / "corpus", n_train=40, n_dev=5)
    argv = ["train", "translate", "--train-src", str(c["train_src"]), "--train-tgt", str(c["train_tgt"]), *TINY,
            "--select", "bleu", "--out", str(tmp_path / "run")]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--select bleu needs dev pairs" in err, err
