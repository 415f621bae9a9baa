import errno
import json

import pytest
import torch
from torch import nn

from attnkit.train import checkpoint as ck


def _model(v: float) -> nn.Module:
    m = nn.Linear(3, 2)
    with torch.no_grad():
        for p in m.parameters():
            p.fill_(v)
    return m


def test_save_load_roundtrip_and_pointers(tmp_path):
    ck.save_checkpoint(tmp_path, _model(1.0), {"task": "t", "labels": ["a", "b"]}, step=1, best=True)
    ck.save_checkpoint(tmp_path, _model(2.0), {"task": "t", "labels": ["a", "b"]}, step=2)
    ck.save_checkpoint(tmp_path, _model(3.0), {"task": "t", "labels": ["a", "b"]}, step=3, keep=1)
    folder, meta = ck.load_meta(tmp_path, task="t")
    assert folder.name == "ckpt-00000003" and meta["step"] == 3 and meta["labels"] == ["a", "b"]
    assert ck.resolve(tmp_path, "best").name == "ckpt-00000001"  # the best is never pruned
    assert not (tmp_path / "ckpt-00000002").exists()
    m = _model(0.0)
    ck.load_weights(folder, m)
    assert float(m.weight[0, 0].detach()) == 3.0


@pytest.mark.parametrize("fail_in", ["model.safetensors", "trainer.safetensors"])
def test_full_disk_mid_save_keeps_previous_checkpoint(tmp_path, monkeypatch, fail_in):
    ck.save_checkpoint(tmp_path, _model(1.0), {"task": "t"}, step=1, trainer_state={"x": torch.ones(2)})
    import safetensors.torch

    real = safetensors.torch.save_file

    def disk_full(tensors, path, *a, **k):
        if path.endswith(fail_in):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(tensors, path, *a, **k)

    monkeypatch.setattr(safetensors.torch, "save_file", disk_full)
    with pytest.raises(OSError, match="No space"):
        ck.save_checkpoint(tmp_path, _model(2.0), {"task": "t"}, step=2, trainer_state={"x": torch.ones(2)})
    folder, meta = ck.load_meta(tmp_path)
    assert meta["step"] == 1 and json.loads((tmp_path / "latest.json").read_text())["step"] == 1
    assert not list(tmp_path.glob(".tmp-*"))  # the half-written folder was removed
    m = _model(0.0)
    ck.load_weights(folder, m)
    assert float(m.weight[0, 0].detach()) == 1.0


def test_killed_save_leftover_is_ignored(tmp_path):
    ck.save_checkpoint(tmp_path, _model(1.0), {"task": "t"}, step=1)
    leftover = tmp_path / ".tmp-ckpt-00000002-deadbeef"  # what a kill -9 mid-save leaves
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"\x00" * 10)
    assert ck.resolve(tmp_path).name == "ckpt-00000001"
    ck.save_checkpoint(tmp_path, _model(2.0), {"task": "t"}, step=2)
    assert not leftover.exists()


def test_clear_errors(tmp_path):
    with pytest.raises(ck.CheckpointError, match="does not exist"):
        ck.load_meta(tmp_path / "nope")
    with pytest.raises(ck.CheckpointError, match="no checkpoint"):
        ck.load_meta(tmp_path)
    folder = ck.save_checkpoint(tmp_path, _model(1.0), {"task": "tagger"}, step=1)
    with pytest.raises(ck.CheckpointError, match="trained for task 'tagger', not 'classifier'"):
        ck.load_meta(tmp_path, task="classifier")
    meta = json.loads((folder / "meta.json").read_text())
    meta["format_version"] = ck.FORMAT_VERSION + 1
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ck.CheckpointError, match=f"format version {ck.FORMAT_VERSION + 1}"):
        ck.load_meta(tmp_path)
    meta["format_version"] = ck.FORMAT_VERSION
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ck.CheckpointError, match="cannot be resumed"):
        ck.load_trainer_state(folder)
    with pytest.raises(ck.CheckpointError, match="do not fit"):
        ck.load_weights(folder, nn.Linear(4, 2))
