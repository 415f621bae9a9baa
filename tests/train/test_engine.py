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
    assert meta["labels"] == ["left", "right"] and meta["format_version"] == 2
    assert sorted(meta["files"]) == ["model.safetensors", "trainer.json", "trainer.safetensors"]
    assert res["best_dev"]["accuracy"] == max(r["accuracy"] for r in read_metrics(tmp_path / "metrics.jsonl")
                                              if r["split"] == "dev")
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



def jitter(seed: int, calls: list):
    """A ``Task.augment`` adding noise drawn from (seed, epoch, index) alone; each call recorded in ``calls``."""
    def augment(examples, indices, epoch):
        calls.append((epoch, list(indices)))
        out = []
        for (x, y), i in zip(examples, indices):
            g = torch.Generator().manual_seed(seed * 1_000_003 + epoch * 1009 + i)
            out.append((x + 0.3 * torch.randn(x.shape, generator=g), y))
        return out
    return augment


def test_augment_sees_each_step_s_examples_and_epoch_and_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    calls, full = [], toy_task()
    full.augment = jitter(3, calls)
    Trainer(full, CFG).fit(tmp_path / "full")
    assert len(calls) == 36 and [c[0] for c in calls] == [e for e in range(4) for _ in range(9)]
    for epoch in range(4):  # every training example once per epoch, in that epoch's batches
        assert sorted(i for e, idx in calls if e == epoch for i in idx) == list(range(72))
    plain = toy_task()
    Trainer(plain, CFG).fit(tmp_path / "plain")
    assert not torch.equal(_weights(plain.model)["0.weight"], _weights(full.model)["0.weight"])  # it changed training

    part, part_calls = toy_task(), []
    part.augment = jitter(3, part_calls)
    Trainer(part, CFG, on_step=lambda t, step, rec: step == 13 and t.request_stop()).fit(tmp_path / "part")
    resumed = toy_task(model_seed=99)
    resumed.augment = jitter(3, part_calls)
    Trainer(resumed, CFG).fit(tmp_path / "part", resume=True)
    assert part_calls == calls
    for k, v in _weights(full.model).items():
        torch.testing.assert_close(_weights(resumed.model)[k], v, rtol=0, atol=0)


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


def test_a_warm_up_longer_than_half_the_run_is_shortened_and_said(tmp_path, capsys):
    """--max-steps below --warmup-steps: the learning rate still peaks (at half the run), and the run says so."""
    from attnkit.train.schedule import effective_warmup, warmup_note

    assert effective_warmup("linear", 400, 30) == 15 and effective_warmup("cosine", 400, 10_000) == 400
    assert effective_warmup("linear", 5, 1) == 0
    # inverse_sqrt does not depend on the run's length (a resumed run may raise --max-steps): kept, with a warning
    assert effective_warmup("inverse_sqrt", 400, 30) == 400 and effective_warmup("constant", 400, 30) == 400
    assert warmup_note("inverse_sqrt", 400, 30) == ("the warm-up of 400 steps is longer than this run of 30 steps: "
                                                    "the learning rate stops at 8% of --lr (inverse_sqrt keeps the "
                                                    "warm-up it is given)")
    assert warmup_note("linear", 10, 30) is None and warmup_note("inverse_sqrt", 10, 30) is None
    lrs = []
    cfg = TrainConfig(**{**CFG.__dict__, "max_steps": 10, "warmup_steps": 400})
    Trainer(toy_task(), cfg, on_step=lambda tr, step, rec: lrs.append(rec["lr"])).fit(tmp_path / "short")
    assert max(lrs) == pytest.approx(1e-2) and lrs.index(max(lrs)) == 3  # lr after each step: 5 steps up, 5 down
    assert lrs[:4] == pytest.approx([4e-3, 6e-3, 8e-3, 1e-2]) and lrs[-1] == pytest.approx(0.0)
    assert "the warm-up of 400 steps is longer than half this run of 10 steps: warming up over 5 steps instead" \
        in capsys.readouterr().out
    lrs.clear()
    Trainer(toy_task(), TrainConfig(**{**CFG.__dict__, "max_steps": 10}),
            on_step=lambda tr, step, rec: lrs.append(rec["lr"])).fit(tmp_path / "normal")
    assert lrs.index(max(lrs)) == 1 and "warming up over" not in capsys.readouterr().out  # 3 steps: as asked


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


class FakeClock:
    """Seconds that advance one per call of ``tick`` (one per step), whatever the real time."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _budget_stopped(task, cfg, stop_at):
    """A trainer whose clock says one minute passes per step: ``max_minutes=stop_at`` stops it there."""
    clock = FakeClock()

    def tick(trainer, step, rec):
        clock.t += 60.0 + 1e-6

    tr = Trainer(task, TrainConfig(**{**cfg.__dict__, "max_minutes": float(stop_at) - 0.5}), on_step=tick)
    tr.clock = clock
    return tr


@pytest.mark.parametrize("stop_at", [9, 14])  # at an epoch end (and evaluation), mid-epoch
def test_time_budget_stop_then_resume_matches_uninterrupted_run(tmp_path, stop_at):
    """--max-minutes stops a run early and saves it; the schedule follows steps, not the clock, so
    resuming gives bitwise the weights and metrics of a run that was never stopped."""
    full = toy_task()
    res_full = Trainer(full, CFG).fit(tmp_path / "full")
    res = _budget_stopped(toy_task(), CFG, stop_at).fit(tmp_path / "part")
    assert res["step"] == stop_at and res["time_budget_reached"] and not res["interrupted"] and not res["complete"]
    assert res["test"]["count"] == 24  # scored with what it has
    assert json.loads((tmp_path / "part/latest.json").read_text())["step"] == stop_at
    resumed = toy_task(model_seed=99)  # fresh weights: everything must come from the checkpoint
    res_resumed = Trainer(resumed, CFG).fit(tmp_path / "part", resume=True)
    assert res_resumed["step"] == 36 and res_resumed["complete"] and not res_resumed["time_budget_reached"]
    for k, v in _weights(full.model).items():
        torch.testing.assert_close(_weights(resumed.model)[k], v, rtol=0, atol=0)
    assert res_resumed["test"] == res_full["test"] and res_resumed["best_dev"] == res_full["best_dev"]

    def records(run):
        return [{k: v for k, v in r.items() if k not in ("items_per_s", "seconds")}
                for r in read_metrics(tmp_path / run / "metrics.jsonl")]

    assert records("part") == records("full")  # train losses, learning rates, dev and test: one test record


def test_schedule_follows_steps_not_the_clock(tmp_path):
    """A slow clock (an hour per step) and a time budget that is never reached change nothing."""
    lrs = {}
    for name, hours in (("fast", 0.0), ("slow", 1.0)):
        clock = FakeClock()
        seen = lrs.setdefault(name, [])

        def tick(trainer, step, rec, clock=clock, hours=hours, seen=seen):
            clock.t += 3600 * hours
            seen.append(rec["lr"])

        tr = Trainer(toy_task(), TrainConfig(**{**CFG.__dict__, "max_minutes": 1e6}), on_step=tick)
        tr.clock = clock
        lrs[name + "_res"] = tr.fit(tmp_path / name)
    assert lrs["fast"] == lrs["slow"] and len(lrs["fast"]) == 36
    assert lrs["fast"][1] == pytest.approx(1e-2) and lrs["fast"][-1] == 0.0
    assert lrs["fast_res"]["test"] == lrs["slow_res"]["test"]


def test_same_seed_same_numbers_other_seed_other_numbers(tmp_path):
    a, b, c = toy_task(), toy_task(), toy_task()
    ra = Trainer(a, CFG).fit(tmp_path / "a")
    rb = Trainer(b, CFG).fit(tmp_path / "b")
    rc = Trainer(c, TrainConfig(**{**CFG.__dict__, "seed": 4})).fit(tmp_path / "c")
    assert ra["test"] == rb["test"] and ra["dev"] == rb["dev"]
    for k, v in _weights(a.model).items():
        torch.testing.assert_close(_weights(b.model)[k], v, rtol=0, atol=0)
    assert rc["dev"]["loss"] != ra["dev"]["loss"]


def test_fresh_run_refuses_a_folder_with_a_run_unless_overwrite(tmp_path):
    Trainer(toy_task(), CFG).fit(tmp_path)
    mine = tmp_path / "notes.txt"
    mine.write_text("not attnkit's")
    with pytest.raises(ValueError, match="already holds a run .*--resume.*--overwrite"):
        Trainer(toy_task(), CFG).fit(tmp_path)
    assert (tmp_path / "latest.json").exists()  # nothing was deleted
    cfg = TrainConfig(**{**CFG.__dict__, "max_steps": 5})
    res = Trainer(toy_task(), cfg).fit(tmp_path, overwrite=True)
    assert res["step"] == 5 and mine.read_text() == "not attnkit's"
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == ["ckpt-00000005"]
    assert max(r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")) == 5  # the old log is gone
    with pytest.raises(CheckpointError, match="empty does not exist"):
        Trainer(toy_task(), CFG).fit(tmp_path / "empty", resume=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        Trainer(toy_task(), CFG).fit(tmp_path / "empty", resume=True)


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


KILLABLE = """
import sys, time
from attnkit.train import TrainConfig, Trainer
from tests.train.toy import toy_task
from tests.train.test_engine import CFG
Trainer(toy_task(), CFG, on_step=lambda t, s, r: time.sleep(0.05)).fit(sys.argv[1], resume=len(sys.argv) > 2)
"""


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path):
    """kill -9 in the middle of a run (after its first checkpoint), then --resume: bitwise the same."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "killed"
    p = subprocess.Popen([sys.executable, "-c", KILLABLE, str(out)], env=env, cwd=root,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (out / "latest.json").exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    killed_at = json.loads((out / "latest.json").read_text())["step"]
    assert p.returncode == -signal.SIGKILL and 9 <= killed_at < 36
    r = subprocess.run([sys.executable, "-c", KILLABLE, str(out), "resume"], env=env, cwd=root,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    Trainer(toy_task(), CFG).fit(tmp_path / "full")
    from safetensors.torch import load_file

    def last_weights(run):
        return load_file(str(run / json.loads((run / "latest.json").read_text())["path"] / "model.safetensors"))

    resumed, full = last_weights(out), last_weights(tmp_path / "full")
    for k, v in full.items():
        torch.testing.assert_close(resumed[k], v, rtol=0, atol=0)
    def scores(run):
        return [(m["split"], m["step"], m["accuracy"], m["loss"]) for m in read_metrics(run / "metrics.jsonl")
                if m["split"] != "train"]

    assert scores(tmp_path / "full") == scores(out), (killed_at, r.stdout[-3000:])


@pytest.mark.parametrize("pointer", ["missing", "elsewhere"])
def test_resume_repairs_best_json_left_wrong_by_a_kill(tmp_path, pointer):
    """A kill between the writes of best.json and latest.json leaves best.json missing or naming a
    checkpoint the resumed state has not reached: resume points it back at the state's best step,
    so the test set is still scored with the best checkpoint, as in an uninterrupted run."""
    res_full = Trainer(toy_task(), CFG).fit(tmp_path / "full")
    assert res_full["best_step"] == 9  # the toy run's best dev score is its first

    def stopper(trainer, step, rec):
        if step == 20:
            trainer.request_stop()

    part = tmp_path / "part"
    Trainer(toy_task(), CFG, on_step=stopper).fit(part)
    if pointer == "missing":
        (part / "best.json").unlink()
    else:
        (part / "best.json").write_text(json.dumps({"path": "ckpt-00000018", "step": 18, "metrics": {}}))
    res = Trainer(toy_task(model_seed=99), CFG).fit(part, resume=True)
    assert res["best_step"] == 9 and res["test"] == res_full["test"] and res["best_dev"] == res_full["best_dev"]
    assert json.loads((part / "best.json").read_text())["path"] == "ckpt-00000009"


def test_best_json_naming_a_missing_checkpoint_is_an_error_not_a_substitute(tmp_path):
    Trainer(toy_task(), CFG).fit(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / "ckpt-00000009")
    with pytest.raises(CheckpointError, match="best.json names ckpt-00000009, which is missing.*--which latest"):
        load_meta(tmp_path, which="best")
    assert load_meta(tmp_path, which="latest")[0].name == "ckpt-00000036"


def test_token_batches_respect_the_budget_and_cover_everything():
    from attnkit.train.batches import token_batches

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
