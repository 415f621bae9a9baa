"""``attnkit experiment speakers`` on generated recordings (tones, not speech: the folds learn nothing; these check
the plumbing): each fold a run of `attnkit train asr` in its own process, a fold stopped part-way resumed, a finished
one skipped or only scored, the table, the JSON and the figure."""

from __future__ import annotations

import json

import pytest

from attnkit.cli.main import build_parser, main
from attnkit.experiments import speakers as S
from attnkit.nn import TransformerConfig
from attnkit.tasks import asr
from attnkit.tasks.options import config_from_args
from attnkit.train import TrainConfig, Trainer
from tests.data.test_fsdd import write_set

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_folds_resume_skip_and_report(tmp_path):
    write_set(tmp_path / "data" / "fsdd" / "recordings", speakers=("alice", "bob", "carol"), digits=range(10),
              indices=range(11))
    out, data = tmp_path / "out", tmp_path / "data"
    config = S.SpeakersConfig(speakers=("alice", "bob"), seeds=1, tiny=True, train_options="--ctc-weight 0.4")
    # alice's fold was stopped at step 2 of 4: the experiment continues it with --resume
    argv = S.fold_command(out / "alice-seed0", config, "alice", 0, threads=1, data_dir=data)
    assert argv[1:3] == ["-m", "attnkit.cli.main"] and argv[-2:] == ["--ctc-weight", "0.4"]
    args = build_parser().parse_args(argv[3:])
    task = asr.build(args, config_from_args(TransformerConfig, args), seed=0)
    Trainer(task, config_from_args(TrainConfig, args), on_step=lambda t, step, r: step == 2 and t.request_stop()).fit(
        args.out)
    lines = []
    res = S.run(out, config, command="attnkit experiment speakers --quick", log=lines.append, data_dir=data)
    assert "--resume" in (out / "alice-seed0" / "train.log").read_text()
    assert "resumed from" in (out / "alice-seed0" / "train.log").read_text()
    assert "--resume" not in (out / "bob-seed0" / "train.log").read_text()
    rows = [json.loads(r) for r in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["x"], r["seed"], r["steps"]) for r in rows] == [("alice", 0, 4), ("bob", 0, 4)]
    scores = json.loads((out / "bob-seed0" / "scores.json").read_text())
    assert rows[1]["speaker_ctc"] == scores["sets"]["speaker"]["modes"]["ctc"]["der"] / 100
    meta = json.loads((out / "alice-seed0" / "ckpt-00000004" / "meta.json").read_text())
    assert meta["holdout_speaker"] == "alice" and meta["model"]["ctc_weight"] == 0.4 and meta["model"]["encoder"][
        "d_model"] == 32
    md = (out / "speakers.md").read_text()
    assert "| alice | " in md and "| bob | " in md and "**mean over 2 folds**" in md and "| worst fold |" in md
    assert res["figure"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    numbers = json.loads((out / "speakers.json").read_text())
    mean = (rows[0]["speaker_joint"] + rows[1]["speaker_joint"]) / 2
    assert numbers["mean"]["speaker_joint"] == pytest.approx(mean) and set(numbers["folds"]) == {"alice", "bob"}
    # again: nothing trained; a finished fold missing from results.jsonl is only scored
    logs = {s: (out / f"{s}-seed0" / "train.log").read_text() for s in ("alice", "bob")}
    (out / "results.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (out / "bob-seed0" / "scores.json").unlink()
    S.run(out, config, log=lines.append, data_dir=data)
    assert {s: (out / f"{s}-seed0" / "train.log").read_text() for s in ("alice", "bob")} == logs
    again = [json.loads(r) for r in (out / "results.jsonl").read_text().splitlines()]
    assert again[1]["speaker_ctc"] == rows[1]["speaker_ctc"] and (out / "bob-seed0" / "scores.json").exists()


def test_fold_table_means_and_worst():
    rows = [{"model": "asr", "x": spk, "seed": seed, **{m: v + seed / 100 for m in S.METRICS}}
            for spk, v in (("george", 0.2), ("jackson", 0.1)) for seed in (0, 1)]
    table, numbers = S.fold_table(rows, ("george", "jackson", "theo"))
    assert numbers["mean"]["speaker_ctc"] == pytest.approx(0.155) and numbers["worst"]["speaker_ctc"] == (
        pytest.approx(0.205), "george")
    assert "| george | 20.50 ± 0.71 |" in table and "theo" not in table
    assert "| **mean over 2 folds** | **15.50** |" in table


@pytest.mark.parametrize("options, words", [("--seed 3", "may not give --seed"),
                                            ("--out=x", "may not give --out"),
                                            ("--noise '0.5", "is not a command line")])
def test_train_options_the_folds_set_are_refused(options, words, capsys):
    with pytest.raises(ValueError, match=words):
        S.SpeakersConfig(train_options=options)
    assert main(["experiment", "speakers", f"--train-options={options}", "--out", "x"]) == 1
    err = capsys.readouterr().err
    assert words in err and len(err.splitlines()) == 1


def test_speakers_are_names_on_the_command_line():
    args = build_parser().parse_args(["experiment", "speakers", "--speakers", "george,theo", "--seeds", "1"])
    assert args.speakers == ("george", "theo") and args.seeds == 1
    with pytest.raises(ValueError, match="`speakers` holds 'theo' twice"):
        S.SpeakersConfig(speakers=("theo", "theo"))
    with pytest.raises(SystemExit):  # on the command line, FSDD's speakers
        build_parser().parse_args(["experiment", "speakers", "--speakers", "george,alice"])


def test_a_fold_training_in_this_process_says_its_last_log_line(tmp_path, monkeypatch, capsys):
    """``--jobs 1``: while a fold trains (its output going to train.log), the log's last line is printed every time
    the wait for it runs out (``runner.WAIT_LINE``); in a worker process nothing is (the main process says which
    folds are under way)."""
    import multiprocessing
    import subprocess

    waits = []

    class Fold:  # a fold's process that writes a progress line to its log each time it is waited for
        def __init__(self, cmd, stdout, stderr, env):
            self.log, self.step = stdout, 0

        def wait(self, timeout=None):
            waits.append(timeout)
            if self.step == 3 or timeout is None:
                return 0
            self.step += 1
            self.log.write(f"step {self.step}/4  (0:{10 * self.step} in)\n\n")
            self.log.flush()
            raise subprocess.TimeoutExpired("attnkit", timeout)

    monkeypatch.setattr(S.subprocess, "Popen", Fold)
    log = tmp_path / "train.log"
    assert S.train_fold(["attnkit", "train", "asr"], {}, log, "alice-seed0") == 0
    assert capsys.readouterr().out.splitlines() == [f"  alice-seed0: step {k}/4  (0:{10 * k} in)" for k in (1, 2, 3)]
    assert waits == [S.WAIT_LINE] * 4 and 0 < S.WAIT_LINE <= 10
    assert log.read_text().startswith("$ attnkit train asr\n")
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())  # as in a worker process
    waits.clear()
    assert S.train_fold(["attnkit", "train", "asr"], {}, log, "bob-seed0") == 0
    assert capsys.readouterr().out == "" and waits == [None]
