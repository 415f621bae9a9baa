"""A task's own dev metric (``Task.score``) and the one that picks the best checkpoint (``Task.select``)."""

import dataclasses
import json

import pytest

from attnkit.train import TrainConfig, Trainer, read_metrics

from .toy import toy_task

CFG = TrainConfig(epochs=4, batch_size=8, lr=1e-2, warmup_steps=3, log_every=2, progress=False, seed=3, keep=1)


class Scores:
    """``score``: the next of ``values`` at each call, as {"custom": v}; records the model's mode it was given."""

    def __init__(self, values):
        self.values, self.modes = list(values), []

    def __call__(self, model):
        self.modes.append(model.training)
        return {"custom": self.values[len(self.modes) - 1]}


def test_the_best_checkpoint_is_the_selected_metrics_not_the_accuracys(tmp_path):
    """Evaluations at steps 9, 18, 27, 36: the score peaks at 18, so best.json and the test set use step 18,
    whatever the accuracy did; every dev record carries the score."""
    scores = Scores([0.1, 0.9, 0.5, 0.3])
    task = dataclasses.replace(toy_task(), score=scores, select="custom")
    res = Trainer(task, CFG).fit(tmp_path)
    dev = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["split"] == "dev"]
    assert [(r["step"], r["custom"]) for r in dev] == [(9, 0.1), (18, 0.9), (27, 0.5), (36, 0.3)]
    assert res["best_step"] == 18 and res["best_dev"]["custom"] == 0.9
    assert json.loads((tmp_path / "best.json").read_text())["step"] == 18
    assert res["checkpoint"].endswith("ckpt-00000018")
    assert (tmp_path / "ckpt-00000018").is_dir()  # kept although --keep 1: it is the best
    assert scores.modes == [True] * 4  # the model as the loop has it (the score function sets its own mode)


def test_a_selected_metric_nobody_measures_is_refused(tmp_path):
    with pytest.raises(ValueError, match="selects the best checkpoint by 'bleu' but has no `score`"):
        Trainer(dataclasses.replace(toy_task(), select="bleu"), CFG)
    task = dataclasses.replace(toy_task(), score=Scores([1.0] * 4), select="bleu")
    with pytest.raises(ValueError, match=r"by 'bleu', a dev metric it does not measure \(accuracy, loss, count, "
                                         r"custom\)"):
        Trainer(task, CFG).fit(tmp_path)


def test_resuming_with_another_selected_metric_says_so_and_compares_afresh(tmp_path, capsys):
    """Stopped at step 18 while selecting by accuracy (best: its accuracy); resumed selecting by the score, the
    next evaluation starts the comparison even if its score is below the old accuracy."""
    def stop(trainer, step, rec):
        if step == 18:
            trainer.request_stop()

    Trainer(toy_task(), CFG, on_step=stop).fit(tmp_path)
    capsys.readouterr()
    task = dataclasses.replace(toy_task(), score=Scores([0.01, 0.02]), select="custom")
    res = Trainer(task, CFG).fit(tmp_path, resume=True)
    said = capsys.readouterr()
    assert "chosen by dev accuracy; from now on by dev custom" in said.out + said.err
    assert res["best_step"] == 36 and res["best_dev"]["custom"] == 0.02


def test_pick_last_makes_the_last_checkpoint_the_runs_model(tmp_path, capsys):
    """Scores peak at step 18; with ``pick="last"`` best.json, the result and the test set use step 36, and
    the result says which rule chose it (the run's summary reads it)."""
    from attnkit.cli.train import summary

    task = dataclasses.replace(toy_task(), score=Scores([0.1, 0.9, 0.5, 0.3]), select="custom")
    res = Trainer(task, dataclasses.replace(CFG, pick="last")).fit(tmp_path / "last")
    assert res["best_step"] == 36 and res["pick"] == "last" and res["best_dev"]["custom"] == 0.3
    assert json.loads((tmp_path / "last" / "best.json").read_text())["step"] == 36
    assert res["checkpoint"].endswith("ckpt-00000036")
    lines = summary(res)
    assert any(line.startswith("test accuracy:") and line.endswith("(last checkpoint)") for line in lines), lines
    said = capsys.readouterr()
    assert "(the run's model: the last step)" in said.out + said.err
    best = Trainer(dataclasses.replace(toy_task(), score=Scores([0.1, 0.9, 0.5, 0.3]), select="custom"),
                   CFG).fit(tmp_path / "best")
    assert best["best_step"] == 18 and best["test"] != res["test"]  # another checkpoint scored the test set


def test_pick_is_checked():
    with pytest.raises(ValueError, match=r"`pick` must be one of \('best', 'last'\), got 'first'"):
        TrainConfig(pick="first")
