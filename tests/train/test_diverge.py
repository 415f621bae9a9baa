"""A loss that becomes NaN or inf stops the training in one line naming the step; the last good checkpoint stays
the latest, and nothing of the bad step is logged or saved."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from attnkit.train import TrainConfig, Trainer, read_metrics
from attnkit.train.engine import TrainingDiverged

from .test_engine import CFG
from .toy import toy_task

EVERY_4 = TrainConfig(**{**CFG.__dict__, "eval_every": 4, "max_steps": 12})  # checkpoints at steps 4, 8, 12


def poisoned(at_call: int, value: float):
    """The toy task whose loss is ``value`` on its ``at_call``-th training call (1-based): an extra loss term."""
    task, calls = toy_task(), [0]
    forward = task.forward

    def fwd(m, batch):
        logits, targets = forward(m, batch)
        if m.training:
            calls[0] += 1
            if calls[0] == at_call:
                return logits, targets, (logits * 0).sum() + value  # NaN / inf gradients, as a real blow-up gives
        return logits, targets

    task.forward = fwd
    return task


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_nan_or_inf_loss_stops_at_its_step_keeping_the_last_checkpoint(tmp_path, value):
    with pytest.raises(TrainingDiverged) as e:
        Trainer(poisoned(10, value), EVERY_4).fit(tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and f"the training loss is {value} at step 10" in msg
    assert f"the last checkpoint, {tmp_path / 'ckpt-00000008'}, is kept" in msg and "--lr" in msg
    assert json.loads((tmp_path / "latest.json").read_text())["step"] == 8
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == ["ckpt-00000004", "ckpt-00000008"]
    weights = load_file(str(tmp_path / "ckpt-00000008" / "model.safetensors"))
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert max(r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")) == 8  # step 10 is not logged
    assert not list(tmp_path.glob(".tmp-*"))
    res = Trainer(toy_task(), EVERY_4).fit(tmp_path, resume=True)  # the run goes on from step 8
    assert res["step"] == 12 and res["test"]["accuracy"] > 0.7


def test_a_nan_before_the_first_checkpoint_says_none_was_written(tmp_path):
    with pytest.raises(TrainingDiverged, match="at step 2; .*no checkpoint was written"):
        Trainer(poisoned(2, math.nan), EVERY_4).fit(tmp_path)
    assert not list(tmp_path.glob("ckpt-*")) and not (tmp_path / "latest.json").exists()


def test_weights_that_are_not_finite_are_never_saved(tmp_path):
    """A finite loss whose step still left a NaN weight (e.g. an infinite gradient): the save refuses it."""
    def spoil(trainer, step, rec):
        if step == 8:
            with torch.no_grad():
                trainer.model[0].weight[0, 0] = math.nan

    with pytest.raises(TrainingDiverged, match="the weights are not finite .* after step 8"):
        Trainer(toy_task(), EVERY_4, on_step=spoil).fit(tmp_path)
    assert json.loads((tmp_path / "latest.json").read_text())["step"] == 4
