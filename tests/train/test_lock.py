"""One writer per run folder: a second training into the same folder is refused in one line naming the PID of the
first; the lock is the OS's, so a `kill -9` never leaves a stale one; what a killed average leaves is cleaned on
resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnkit.cli.main import main
from attnkit.train import TrainConfig, Trainer, read_metrics
from attnkit.train.lock import LOCK_FILE, RunLocked, run_lock

from .test_engine import CFG, KILLABLE
from .toy import toy_task

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
SHORT = TrainConfig(**{**CFG.__dict__, "max_steps": 3})
HOLD = """
import fcntl, json, os, socket, sys, time
os.makedirs(sys.argv[1], exist_ok=True)
fd = os.open(os.path.join(sys.argv[1], ".attnkit-lock"), os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)  # what attnkit.train.lock does, without importing torch (a fast start)
os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode())
print("locked", flush=True)
time.sleep(120)
"""


def start(script: str, *args, wait_for=None) -> subprocess.Popen:
    """A Python process running ``script``; returns once ``wait_for`` (a path) exists or it printed a line."""
    p = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], env=ENV, cwd=ROOT, text=True,
                         stdout=subprocess.PIPE if wait_for is None else subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if wait_for is None:
        assert p.stdout.readline().strip() == "locked"
    else:
        deadline = time.time() + 120
        while not Path(wait_for).exists() and time.time() < deadline and p.poll() is None:
            time.sleep(0.02)
        assert p.poll() is None, "the process ended early"
    return p


@pytest.mark.slow
def test_a_second_training_is_refused_naming_the_first_and_the_first_is_untouched(tmp_path):
    out = tmp_path / "run"
    first = start(KILLABLE, out, wait_for=out / "latest.json")  # a training that takes a few seconds
    try:
        for kw in ({}, {"overwrite": True}, {"resume": True}):
            with pytest.raises(RunLocked, match=f"{out} is in use: another process \\(PID {first.pid}\\)"):
                Trainer(toy_task(), CFG).fit(out, **kw)
        assert first.wait(timeout=120) == 0
    finally:
        first.kill()
    recs = [(r["split"], r["step"]) for r in read_metrics(out / "metrics.jsonl")]
    assert len(recs) == len(set(recs)) and ("test", 36) in recs  # every record once: one writer
    assert json.loads((out / "latest.json").read_text())["step"] == 36
    assert not (out / LOCK_FILE).exists()  # the holder removes its lock file when it ends


def test_the_command_line_refuses_before_writing_anything(tmp_path, capsys):
    from tests.tasks.corpus import write_corpus

    paths = write_corpus(tmp_path / "data", n_train=40, n_dev=5)
    out = tmp_path / "run"
    holder = start(HOLD, out)
    try:
        argv = ["train", "translate", "--train-src", str(paths["train_src"]), "--train-tgt", str(paths["train_tgt"]),
                "--vocab-size", "60", "--d-model", "16", "--num-heads", "2", "--d-ff", "32", "--max-steps", "2",
                "--no-progress", "--out", str(out)]
        for extra in ([], ["--overwrite"], ["--resume"]):
            assert main([*argv, *extra]) == 1
            err = capsys.readouterr().err.strip()
            assert "\n" not in err and f"is in use: another process (PID {holder.pid})" in err, err
        assert sorted(os.listdir(out)) == [LOCK_FILE]  # no bpe.json, no metrics: nothing was written
    finally:
        holder.kill()
        holder.wait()


def test_kill_9_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "run"
    holder = start(HOLD, out)
    with pytest.raises(RunLocked, match=f"PID {holder.pid}"):
        Trainer(toy_task(), CFG).fit(out)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == holder.pid  # the file stays, unlocked
    res = Trainer(toy_task(), SHORT).fit(out)
    assert res["step"] == 3 and not (out / LOCK_FILE).exists()


def test_the_lock_is_reentrant_in_one_process_and_released_after_an_error(tmp_path):
    out = tmp_path / "run"
    with run_lock(out):
        with run_lock(out):  # attnkit train holds it around Trainer.fit, which takes it again
            assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()
        assert (out / LOCK_FILE).exists()
    assert not (out / LOCK_FILE).exists()
    with pytest.raises(ZeroDivisionError):
        with run_lock(out):
            raise ZeroDivisionError
    with run_lock(out):  # released by the error: taken again at once
        pass
    with run_lock(tmp_path / "missing", create=False):  # nothing to protect in a folder that does not exist
        assert not (tmp_path / "missing").exists()


def test_resume_cleans_what_a_kill_during_averaging_leaves(tmp_path, monkeypatch):
    """A kill inside ``average_checkpoints`` (here: an exception at the same point, which the folder's cleanup
    is told to skip, as a kill skips it) leaves .tmp-average-*; --resume removes it."""
    import shutil

    from attnkit.train.average import average_checkpoints

    out = tmp_path / "run"

    def stop_at_18(trainer, step, rec):
        if step == 18:
            trainer.request_stop()

    assert Trainer(toy_task(), CFG, on_step=stop_at_18).fit(out)["interrupted"]
    import safetensors.torch

    def killed(*a, **k):
        monkeypatch.setattr(shutil, "rmtree", lambda *a, **k: None)  # as after a kill: nothing is cleaned up
        raise KeyboardInterrupt

    monkeypatch.setattr(safetensors.torch, "save_file", killed)
    with pytest.raises(KeyboardInterrupt):
        average_checkpoints(out, 2)
    monkeypatch.undo()
    assert len(list(out.glob(".tmp-average-*"))) == 1 and not (out / "average").exists()
    (out / ".tmp-average-0badf00d.old").mkdir()  # a previous average renamed aside when the kill came
    res = Trainer(toy_task(), CFG).fit(out, resume=True)
    assert res["step"] == 36 and not list(out.glob(".tmp-*"))


@pytest.mark.slow
def test_torchrun_ranks_refuse_together_without_waiting(tmp_path):
    """Two torchrun processes into a locked folder: rank 0 is refused, rank 1 learns it at once; none hangs."""
    from .test_distributed import ARGS

    out = tmp_path / "ddp"
    holder = start(HOLD, out)
    try:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
               "attnkit.cli.main", *ARGS, "--batch-size", "8", "--out", str(out)]
        t0 = time.time()
        r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=180)
        assert r.returncode != 0 and time.time() - t0 < 120
        assert f"is in use: another process (PID {holder.pid})" in r.stderr, r.stderr[-3000:]
        ours = r.stderr.split("torch/distributed/elastic")[0]  # before torchrun's own report of the failure
        assert "Traceback" not in ours and ours.count("attnkit: error: ") == 2, r.stderr[-3000:]
        assert sorted(os.listdir(out)) == [LOCK_FILE]
    finally:
        holder.kill()
        holder.wait()
