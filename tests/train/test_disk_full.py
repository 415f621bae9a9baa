"""A full disk (ENOSPC) during training: an OSError naming the file being written, the previous checkpoint intact and
named by latest.json, and --resume ends bitwise where an uninterrupted run ends. No real disk is filled: the write
functions are replaced by ones that fail as a full disk makes them fail."""

import errno
import json

import pytest
import safetensors
import safetensors.torch
import torch
from safetensors.torch import load_file

from attnkit.train import TrainConfig, Trainer
from attnkit.train.metrics import MetricsLog

from .toy import toy_task

CFG = TrainConfig(epochs=1, max_steps=12, batch_size=8, lr=1e-2, warmup_steps=3, log_every=2, eval_every=4,
                  progress=False, seed=3)


def last_weights(run):
    return load_file(str(run / json.loads((run / "latest.json").read_text())["path"] / "model.safetensors"))


def full_disk_from(monkeypatch, n_ok: int) -> None:
    """safetensors' save_file works ``n_ok`` times, then fails as on a full disk (its own error, naming no file)."""
    real, calls = safetensors.torch.save_file, [0]

    def save_file(tensors, path, *a, **k):
        calls[0] += 1
        if calls[0] > n_ok:
            raise safetensors.SafetensorError("Error while serializing: I/O error: No space left on device "
                                              "(os error 28)")
        return real(tensors, path, *a, **k)

    monkeypatch.setattr(safetensors.torch, "save_file", save_file)


def test_full_disk_at_a_checkpoint_keeps_the_previous_one_and_resume_is_exact(tmp_path, monkeypatch):
    Trainer(toy_task(), CFG).fit(tmp_path / "full")
    out = tmp_path / "run"
    full_disk_from(monkeypatch, 2)  # the checkpoint of step 4 (weights + trainer state), then the disk is full
    with pytest.raises(OSError) as e:
        Trainer(toy_task(), CFG).fit(out)
    assert e.value.errno == errno.ENOSPC and e.value.filename.endswith("model.safetensors")
    assert ".tmp-ckpt-00000008-" in e.value.filename  # the file being written: step 8's weights
    assert json.loads((out / "latest.json").read_text())["step"] == 4
    assert sorted(p.name for p in out.iterdir() if p.name.startswith((".", "ckpt"))) == ["ckpt-00000004"]
    monkeypatch.undo()  # space freed
    res = Trainer(toy_task(model_seed=9), CFG).fit(out, resume=True)
    assert res["step"] == 12
    a, b = last_weights(out), last_weights(tmp_path / "full")
    assert all(torch.equal(a[k], b[k]) for k in b)


def test_full_disk_writing_the_metrics_names_metrics_jsonl(tmp_path, monkeypatch):
    def write(self, record):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write() fails: no file named

    monkeypatch.setattr(MetricsLog, "write", write)
    with pytest.raises(OSError) as e:
        Trainer(toy_task(), CFG).fit(tmp_path)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "metrics.jsonl")


def test_the_command_line_says_it_in_one_line_and_resume_continues(tmp_path, monkeypatch, capsys):
    from attnkit.cli.main import main
    from tests.tasks.corpus import write_corpus

    paths = write_corpus(tmp_path / "data", n_train=60, n_dev=5)
    out = tmp_path / "run"
    argv = ["train", "translate", "--train-src", str(paths["train_src"]), "--train-tgt", str(paths["train_tgt"]),
            "--dev-src", str(paths["dev_src"]), "--dev-tgt", str(paths["dev_tgt"]), "--vocab-size", "60",
            "--d-model", "16", "--num-heads", "2", "--d-ff", "32", "--num-encoder-layers", "1",
            "--num-decoder-layers", "1", "--max-steps", "6", "--eval-every", "3", "--average", "0", "--final-beam",
            "0", "--no-progress", "--threads", "1", "--out", str(out)]
    full_disk_from(monkeypatch, 2)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnkit: error: no space left on device writing ") and "\n" not in err, err
    assert err.endswith("model.safetensors") and str(out) in err
    assert json.loads((out / "latest.json").read_text())["step"] == 3
    monkeypatch.undo()
    assert main([*argv, "--resume"]) == 0
    assert json.loads((out / "latest.json").read_text())["step"] == 6
