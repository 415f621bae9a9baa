"""Two processes under torchrun (gloo on CPU) must train the same model as one process with the
same global batch: DDP averages the gradients of the two halves of each batch."""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from attnkit.cli.main import main

ARGS = ["train", "image", "--dataset", "digits", "--max-steps", "8", "--eval-every", "4", "--d-model", "16",
        "--num-heads", "2", "--d-ff", "32", "--num-encoder-layers", "1", "--dropout", "0.0", "--no-progress",
        "--log-every", "2", "--warmup-steps", "2", "--lr", "3e-3", "--threads", "1"]


def _weights(out):
    return load_file(str(out / json.loads((out / "latest.json").read_text())["path"] / "model.safetensors"))


@pytest.mark.slow
def test_torchrun_two_processes_match_one_process(tmp_path, capsys):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}  # a crash prints every thread's stack
    ddp, single = tmp_path / "ddp", tmp_path / "single"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "attnkit.cli.main", *ARGS, "--batch-size", "8", "--out", str(ddp)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-6000:]
    assert r.stdout.count("test accuracy:") == 1  # only rank 0 prints
    assert "world size: 2" in r.stdout
    assert main([*ARGS, "--batch-size", "16", "--out", str(single)]) == 0  # one process: this one
    a, b = _weights(ddp), _weights(single)
    for k in a:
        if k.endswith("self_attn.in_proj.bias"):
            # the key bias has an exactly-zero true gradient (softmax ignores a per-query constant); Adam
            # scales the float noise of that zero up to full steps, so it is compared without its key part
            a[k], b[k] = torch.cat((a[k][:16], a[k][32:])), torch.cat((b[k][:16], b[k][32:]))
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5)
    res_ddp = json.loads((ddp / "result.json").read_text())
    res_one = json.loads((single / "result.json").read_text())
    assert res_ddp["test"]["count"] == res_one["test"]["count"] == 360  # eval shards are summed over ranks
    assert abs(res_ddp["test"]["accuracy"] - res_one["test"]["accuracy"]) <= 1 / 360
    assert len(list(ddp.glob("ckpt-*"))) >= 1 and not list(ddp.glob(".tmp-*"))


@pytest.mark.slow
def test_torchrun_stopped_by_time_budget_then_resumed_matches_uninterrupted(tmp_path):
    """Each rank's own RNG state (dropout) is saved and restored: two processes stopped after one step
    by --max-minutes and resumed end with bitwise the weights of two processes never stopped."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [a if a != "0.0" else "0.2" for a in ARGS]  # dropout 0.2: random draws that differ per rank
    base = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "-m", "attnkit.cli.main", *args, "--batch-size", "8"]
    full, part = tmp_path / "full", tmp_path / "part"
    for argv in ([*base, "--out", str(full)], [*base, "--out", str(part), "--max-minutes", "1e-9"],
                 [*base, "--out", str(part), "--resume"]):
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
        if "--max-minutes" in argv:
            assert "stopped by the time budget (--max-minutes) at step 1 of 8" in r.stdout
    a, b = _weights(full), _weights(part)
    assert all(torch.equal(a[k], b[k]) for k in a)
    results = [json.loads((run / "result.json").read_text()) for run in (full, part)]
    assert results[0]["test"] == results[1]["test"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_unavailable_or_unknown_device_is_a_one_line_error(tmp_path, capsys):
    from attnkit.train import distributed as dist

    assert dist.setup("cpu") == torch.device("cpu") and dist.setup(None) == torch.device("cpu")
    with pytest.raises(ValueError, match="'cuda' is not available on this machine \\(available: cpu"):
        dist.setup("cuda")
    with pytest.raises(ValueError, match="unknown device 'gpu0'"):
        dist.setup("gpu0")
    assert main([*ARGS, "--out", str(tmp_path / "x"), "--device", "cuda:1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnkit: error: device: 'cuda:1' is not available")
