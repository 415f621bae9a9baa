import json

import pytest
import torch

from attnkit.train import TrainConfig, Trainer, lr_factor, read_metrics
from attnkit.train.checkpoint import CheckpointError, load_meta

from .toy import toy_task

CFG = TrainConfig(epochs=4, batch_size=8, lr=1e-2, warmup_steps=3, log_every=2, progress=False, seed=3)


def _weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_fit_learns_and_writes_run_folder(tmp_path):
    res = Trainer(toy_task(), CFG).fit(tmp_path)
    assert res["step"] == 4 * 9  # 72 examples / 8
    assert res["test"]["accuracy"] >= 0.8
    assert (tmp_path / "curves.png").stat().st_size > 1000
    latest = json.loads((tmp_path / "latest.json").read_text())
    assert latest["step"] == 36
    folder, meta = load_meta(tmp_path, task="toy")
    assert meta["labels"] == ["left", "right"] and meta["format_version"] == 1
    recs = read_metrics(tmp_path / "metrics.jsonl")
    assert {r["split"] for r in recs} == {"train", "dev", "test"}
    assert [r["step"] for r in recs if r["split"] == "dev"] == [9, 18, 27, 36]
    with pytest.raises(CheckpointError, match="task 'toy'"):
        load_meta(tmp_path, task="tagger")


@pytest.mark.parametrize("stop_at", [9, 20])  # at an epoch boundary, mid-epoch
def test_resume_matches_uninterrupted_run(tmp_path, stop_at):
    full = toy_task()
    res_full = Trainer(full, CFG).fit(tmp_path / "full")

    part = toy_task()

    def stopper(trainer, step, rec):
        if step == stop_at:
            trainer.request_stop()

    res_part = Trainer(part, CFG, on_step=stopper).fit(tmp_path / "part")
    assert res_part["interrupted"] and res_part["step"] == stop_at
    resumed = toy_task(model_seed=99)  # fresh weights: everything must come from the checkpoint
    res_resumed = Trainer(resumed, CFG).fit(tmp_path / "part", resume=True)
    assert res_resumed["step"] == res_full["step"]
    for k, v in _weights(full.model).items():
        torch.testing.assert_close(_weights(resumed.model)[k], v, rtol=0, atol=0)
    assert res_resumed["test"] == res_full["test"]
    a = [r for r in read_metrics(tmp_path / "full/metrics.jsonl") if r["split"] != "train"]
    b = [r for r in read_metrics(tmp_path / "part/metrics.jsonl") if r["split"] != "train"]
    assert [(r["step"], r["accuracy"], r["loss"]) for r in a] == [(r["step"], r["accuracy"], r["loss"]) for r in b]


def test_config_validation():
    with pytest.raises(ValueError, match="`schedule`"):
        TrainConfig(schedule="nope")
    with pytest.raises(ValueError, match="`label_smoothing`"):
        TrainConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="`batch_size`"):
        TrainConfig(batch_size=0)


def test_empty_training_set():
    t = toy_task()
    t.train = []
    with pytest.raises(ValueError, match="empty"):
        Trainer(t, CFG)


def test_schedules():
    assert lr_factor("linear", 0, 10, 100) == pytest.approx(0.1)
    assert lr_factor("linear", 9, 10, 100) == pytest.approx(1.0)
    assert lr_factor("linear", 99, 10, 100) == pytest.approx(0.0)
    # the paper's schedule peaks (normalised to 1) at step = warmup, then decays as step^-0.5
    assert lr_factor("inverse_sqrt", 3, 4, 100) == pytest.approx(1.0)
    assert lr_factor("inverse_sqrt", 15, 4, 100) == pytest.approx(0.5)
    assert lr_factor("inverse_sqrt", 0, 4, 100) == pytest.approx(0.25)
    assert lr_factor("cosine", 54, 10, 100) == pytest.approx(0.5)


def test_ctrl_c_saves_and_stops_cleanly(tmp_path):
    import os
    import signal

    def press_ctrl_c(trainer, step, rec):
        if step == 7:
            os.kill(os.getpid(), signal.SIGINT)

    # a process started in the background or under nohup inherits SIGINT ignored: start from a known handler
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        res = Trainer(toy_task(), CFG, on_step=press_ctrl_c).fit(tmp_path)
        assert res["interrupted"] and res["step"] == 7 and "test" not in res
        assert json.loads((tmp_path / "latest.json").read_text())["step"] == 7
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored
    finally:
        signal.signal(signal.SIGINT, before)


def test_time_budget_finishes_the_run(tmp_path):
    cfg = TrainConfig(**{**CFG.__dict__, "max_minutes": 1e-6})
    res = Trainer(toy_task(), cfg).fit(tmp_path)
    assert res["step"] == 1 and res["time_budget_reached"] and not res["interrupted"]
    assert res["test"]["count"] == 24


def test_bfloat16_autocast_and_inverse_sqrt_schedule(tmp_path):
    cfg = TrainConfig(**{**CFG.__dict__, "bf16": True, "schedule": "inverse_sqrt", "label_smoothing": 0.1})
    res = Trainer(toy_task(), cfg).fit(tmp_path)
    assert res["test"]["accuracy"] >= 0.75 and res["step"] == 36


def test_extra_loss_from_forward_is_trained_and_logged(tmp_path):
    """A third item from ``forward`` is added to the training loss, and only there."""
    base, ref = toy_task(), toy_task()
    plain = Trainer(ref, CFG).fit(tmp_path / "plain")
    fwd = base.forward

    def with_extra(m, batch):  # L2 of the first layer's weights as the extra loss
        logits, targets = fwd(m, batch)
        return logits, targets, 10.0 * m[0].weight.pow(2).sum()

    base.forward = with_extra
    extra = Trainer(base, CFG).fit(tmp_path / "extra")
    # training shrinks what the extra loss penalises; dev/test losses are cross-entropy alone
    shrunk, kept = float(base.model[0].weight.detach().norm()), float(ref.model[0].weight.detach().norm())
    assert shrunk < 0.85 * kept, (shrunk, kept)
    first = [r for r in read_metrics(tmp_path / "extra" / "metrics.jsonl") if r["split"] == "train"][0]
    first_plain = [r for r in read_metrics(tmp_path / "plain" / "metrics.jsonl") if r["split"] == "train"][0]
    assert first["loss"] > first_plain["loss"] + 1.0  # the logged training loss includes the extra term
    assert extra["test"]["loss"] < 1.0 and plain["test"]["loss"] < 1.0


def test_token_batches_respect_the_budget_and_cover_everything():
    from attnkit.train.engine import token_batches

    lengths = [3, 9, 4, 4, 20, 2, 7, 7, 1]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups = token_batches(order, lengths, budget=16)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        assert len(g) * max(lengths[i] for i in g) <= 16 or len(g) == 1  # an over-long example alone
    assert [4] in groups  # length 20 > budget: a batch of its own
    assert all(len(g) >= 2 for g in token_batches(order, lengths, budget=16, min_size=2)[:-1])  # (the tail may not)


def test_batch_tokens_in_the_trainer():
    t = toy_task()
    t.lengths = [1 + (i % 5) for i in range(len(t.train))]
    tr = Trainer(t, TrainConfig(batch_tokens=20, progress=False))
    batches = tr.epoch_batches(0)
    assert sorted(i for b in batches for i in b) == list(range(len(t.train)))
    assert all(len(b) * max(t.lengths[i] for i in b) <= 20 for b in batches)
    assert batches == Trainer(t, TrainConfig(batch_tokens=20, progress=False)).epoch_batches(0)  # seeded
    with pytest.raises(ValueError, match="batch_tokens"):
        TrainConfig(batch_tokens=-1)
