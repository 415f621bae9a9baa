import json

import pytest
import torch
from safetensors.torch import load_file

from attnkit.train import CheckpointError, save_checkpoint
from attnkit.train.average import average_checkpoints
from attnkit.train.checkpoint import load_meta


def test_average_of_the_last_n_checkpoints(tmp_path):
    m = torch.nn.Linear(3, 2)
    m.register_buffer("count", torch.tensor([5]))
    for step, value in ((1, 0.0), (2, 1.0), (3, 2.0), (4, 4.0)):
        with torch.no_grad():
            m.weight.fill_(value)
            m.bias.fill_(-value)
        save_checkpoint(tmp_path, m, {"task": "toy", "metrics": {"accuracy": value}}, step=step, keep=5)
    folder, used = average_checkpoints(tmp_path, 3)
    assert [p.name for p in used] == ["ckpt-00000002", "ckpt-00000003", "ckpt-00000004"]
    w = load_file(str(folder / "model.safetensors"))
    torch.testing.assert_close(w["weight"], torch.full((2, 3), 7 / 3))
    torch.testing.assert_close(w["bias"], torch.full((2,), -7 / 3))
    assert w["count"].tolist() == [5] and w["count"].dtype == torch.int64
    best, meta = load_meta(tmp_path, which="best")
    assert best == folder and meta["averaged"] == [p.name for p in used] and meta["step"] == 4
    assert json.loads((tmp_path / "latest.json").read_text())["path"] == "ckpt-00000004"  # resume unaffected
    from attnkit.train.checkpoint import load_weights

    fresh = torch.nn.Linear(3, 2)
    fresh.register_buffer("count", torch.tensor([0]))
    load_weights(folder, fresh)  # the average's own checksum, not the newest checkpoint's
    torch.testing.assert_close(fresh.weight, torch.full((2, 3), 7 / 3))
    raw = bytearray((folder / "model.safetensors").read_bytes())
    raw[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="damaged"):
        load_weights(folder, fresh)


def test_average_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        average_checkpoints(tmp_path, 2)
    with pytest.raises(ValueError, match="`n`"):
        average_checkpoints(tmp_path, 0)
