"""Issue 43, items 6, 7 and 9 (options): each reported command, refused in one line naming the command and the
option, before anything is read or allocated; a run whose estimated memory exceeds the machine's says so."""

from __future__ import annotations

import io
import math

import pytest

import attnkit.nn.limits
from attnkit.cli.main import main
from attnkit.data.listops import ListOpsConfig, generate_listops
from attnkit.data.pathfinder import PathfinderConfig, generate_pathfinder
from attnkit.tasks import classifier, tagger
from attnkit.tasks.options import ATTENTION_WORDS
from attnkit.train import TrainConfig


def refused(argv: list[str], capsys) -> str:
    """The one line ``attnkit`` prints for a usage error (exit 2)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize("argv,line", [
    # item 6
    (["translate", "RUN", "Ein Hund.", "--beam", "1000000"],
     "attnkit translate: error: argument --beam: must be an integer in [1, 1024], got '1000000'"),
    (["translate", "RUN", "Ein Hund.", "--max-new-tokens", "1e9"],
     "attnkit translate: error: argument --max-new-tokens: must be an integer in [0, 65536], got '1e9'"),
    (["translate", "RUN", "Ein Hund.", "--max-new-tokens", "1000000000"],
     "attnkit translate: error: argument --max-new-tokens: must be an integer in [0, 65536], got '1000000000'"),
    (["train", "translate", "--out", "R", "--d-model", "1000000"],
     "attnkit train translate: error: argument --d-model: must be an integer in [1, 65536], got '1000000'"),
    (["train", "translate", "--out", "R", "--max-length", "1e9"],
     "attnkit train translate: error: argument --max-length: must be an integer in [4, 65536], got '1e9'"),
    (["train", "translate", "--out", "R", "--vocab-size", "1000000000"],
     "attnkit train translate: error: argument --vocab-size: must be an integer in [16, 16777216], got "
     "'1000000000'"),
    (["train", "translate", "--out", "R", "--threads", "100000"],
     "attnkit train translate: error: argument --threads: must be an integer in [0, 1024], got '100000'"),
    (["train", "tagger", "--out", "R", "--threads", "-1"],
     "attnkit train tagger: error: argument --threads: must be an integer in [0, 1024], got '-1'"),
    (["lra", "generate", "pathfinder", "--out", "D", "--size", "1000000"],
     "attnkit lra generate pathfinder: error: argument --size: must be an integer in [8, 1024], got '1000000'"),
    (["lra", "generate", "listops", "--out", "D", "--n", "1e12"],
     "attnkit lra generate listops: error: argument --n: must be an integer in [1, 10000000], got '1e12'"),
    (["lra", "generate", "listops", "--out", "D", "--n", str(10**12)],
     "attnkit lra generate listops: error: argument --n: must be an integer in [1, 10000000], got "
     "'1000000000000'"),
    (["train", "translate", "--out", "R", "--decoder", "nat", "--iterations", "1000000"],
     "attnkit train translate: error: argument --iterations: must be an integer in [1, 1024], got '1000000'"),
    (["translate", "RUN", "Ein Hund.", "--iterations", "1000000"],
     "attnkit translate: error: argument --iterations: must be an integer in [1, 1024], got '1000000'"),
    # item 7
    (["evaluate", "RUN", "--batch-size", "-1"],
     "attnkit evaluate: error: argument --batch-size: must be an integer in [1, 1048576], got '-1'"),
    (["evaluate", "RUN", "--batch-size", "0"],
     "attnkit evaluate: error: argument --batch-size: must be an integer in [1, 1048576], got '0'"),
    (["train", "image", "--out", "R", "--lr", "inf"],
     "attnkit train image: error: argument --lr: must be a number in (0, 10], got 'inf'"),
    (["train", "image", "--out", "R", "--clip-norm", "nan"],
     "attnkit train image: error: argument --clip-norm: must be a number in [0, 1000000], got 'nan'"),
    (["train", "image", "--out", "R", "--weight-decay", "nan"],
     "attnkit train image: error: argument --weight-decay: must be a number in [0, 10], got 'nan'"),
    (["train", "image", "--out", "R", "--max-minutes", "nan"],
     "attnkit train image: error: argument --max-minutes: must be a number in [0, 10000000], got 'nan'"),
    (["translate", "RUN", "x", "--beam", "4", "--length-penalty", "nan"],
     "attnkit translate: error: argument --length-penalty: must be a number in [-100, 100], got 'nan'"),
    (["train", "translate", "--out", "R", "--average", "-1"],
     "attnkit train translate: error: argument --average: must be an integer in [0, 1000], got '-1'"),
    (["train", "translate", "--out", "R", "--limit", "-1"],
     "attnkit train translate: error: argument --limit: must be an integer in [1, 1000000000], got '-1'"),
    (["translate", "RUN", "x", "--sample", "--temperature", "1e-45"],
     "attnkit translate: error: argument --temperature: must be a number in [0.0001, 10000], got '1e-45'"),
    (["translate", "RUN", "x", "--sample", "--temperature", "inf"],
     "attnkit translate: error: argument --temperature: must be a number in [0.0001, 10000], got 'inf'"),
    # item 9
    (["train", "image", "--out", "R", "--seed", str(2**70)],
     "attnkit train image: error: argument --seed: must be an integer in [0, 9223372036854775807], got "
     "'1180591620717411303424'"),
    (["translate", "RUN", "x", "--sample", "--seed", str(2**70)],
     "attnkit translate: error: argument --seed: must be an integer in [0, 9223372036854775807], got "
     "'1180591620717411303424'"),
])
def test_each_reported_option_is_a_one_line_range_error(argv, line, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written; if it were, it would land here
    assert refused(argv, capsys) == f"{line} (see {line.split(': error')[0]} --help)"
    assert list(tmp_path.iterdir()) == []


def test_the_range_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["translate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--beam K beam size (default 1: greedy) (an integer in [1, 1024])" in text
    assert "(a number in [0.0001, 10000])" in text


def test_the_api_refuses_the_same_values():
    with pytest.raises(ValueError, match=r"^TrainConfig: `seed` must be an integer in \[0, 9223372036854775807\]"):
        TrainConfig(seed=2**70)
    for name in ("clip_norm", "weight_decay", "max_minutes", "lr"):
        with pytest.raises(ValueError, match=f"^TrainConfig: `{name}` must be a number in"):
            TrainConfig(**{name: math.nan})
    with pytest.raises(ValueError, match=r"^TrainConfig: `lr` must be a number in \(0, 10\], got inf$"):
        TrainConfig(lr=math.inf)
    with pytest.raises(ValueError, match=r"^pathfinder: `size` must be an integer in \[8, 1024\], got 1000000$"):
        PathfinderConfig(size=10**6)
    with pytest.raises(ValueError, match=r"^listops: `n_train` must be an integer in \[1, 10000000\]"):
        ListOpsConfig(n_train=10**12)


def small_memory(monkeypatch, gb: float) -> None:
    monkeypatch.setattr(attnkit.nn.limits, "available_memory", lambda *a, **k: int(gb * 2**30))


def test_a_training_run_too_big_for_the_machine_says_so_before_it_starts(tmp_path, capsys, monkeypatch):
    small_memory(monkeypatch, 20)
    out = tmp_path / "run"
    # in range, but 3 x 65536-wide layers and a 16M-entry vocabulary cannot fit in 20 GB
    assert main(["train", "translate", "--out", str(out), "--d-model", "65536", "--num-heads", "8"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnkit: error: train translate: this run (parameters, AdamW state and one batch's "
                          "activations) needs about ") and err.endswith(
        " of memory (an estimate), more than the 20.0 GB this machine has available\n"), err
    assert len(err.splitlines()) == 1 and not out.exists()
    assert main(["train", "translate", "--out", str(out), "--vocab-size", str(2**24)]) == 1
    assert "train translate: this run" in capsys.readouterr().err and not out.exists()


def test_generators_check_their_memory_before_drawing(monkeypatch):
    small_memory(monkeypatch, 1)
    with pytest.raises(ValueError, match=r"^pathfinder: generating 3,000,000 images of 1024x1024 needs about "
                                         r"5859\.4 GB"):
        generate_pathfinder(PathfinderConfig(size=1024, n_train=10**6, n_val=10**6, n_test=10**6))
    with pytest.raises(ValueError, match=r"^listops: generating 10,100,000 expressions of up to 2,000 tokens "
                                         r"needs about"):
        generate_listops(ListOpsConfig(n_train=10**7, n_val=50_000, n_test=50_000))


def test_the_complexity_command_checks_full_attentions_memory(capsys, monkeypatch, tmp_path):
    small_memory(monkeypatch, 4)
    assert main(["complexity", "--out", str(tmp_path), "--lengths", "1024,4096,65536", "--heads", "4"]) == 1
    assert capsys.readouterr().err == ("attnkit: error: complexity: full attention at length 65536 with 4 heads needs "
                                       "about 256.0 GB of memory (an estimate), more than the 4.0 GB this machine has "
                                       "available\n")


def test_predict_attention_on_a_very_long_input_is_refused_before_the_model_runs(monkeypatch, tmp_path):
    calls = []

    def tag(model, meta, words, need_weights=False):  # the model's place: records how it was asked
        calls.append(need_weights)
        return (["X"] * len(words), None) if need_weights else ["X"] * len(words)

    monkeypatch.setattr(tagger, "tag", tag)
    long = " ".join(["word"] * 10_000)
    with pytest.raises(ValueError, match=rf"^predict: --attention draws inputs of up to {ATTENTION_WORDS} tokens; "
                                         r"input 1 has 10,000 \(without --attention it is predicted as it is\)$"):
        tagger.predict(None, {}, [long, "a short one"], tmp_path)
    assert calls == []  # refused before the model ran
    calls.clear()
    assert tagger.predict(None, {}, [long], None) == [" ".join(["word/X"] * 10_000)]
    assert calls == [False]  # without --attention no weights are computed
    with pytest.raises(ValueError, match="input 1 has 10,000"):
        classifier.predict(None, {"words": ["<pad>", "<unk>"], "labels": ["0", "1"], "max_tokens": 65536}, [long],
                           tmp_path)


def test_one_line_for_options_of_the_wrong_kind_too(capsys):
    line = refused(["train", "image", "--out", "R", "--epochs", "x"], capsys)
    assert line == ("attnkit train image: error: argument --epochs: must be an integer in [1, 1000000], got 'x' "
                    "(see attnkit train image --help)")
    line = refused(["embed", "--batch-size", "-inf"], capsys)  # argparse reads "-inf" as an option
    assert line == "attnkit embed: error: argument --batch-size: expected one argument (see attnkit embed --help)"


def test_stdin_is_not_read_when_an_option_is_refused(monkeypatch, capsys):
    stdin = io.StringIO("Ein Hund.\n")
    monkeypatch.setattr("sys.stdin", stdin)
    refused(["translate", "RUN", "--beam", "0"], capsys)
    assert stdin.read() == "Ein Hund.\n"
