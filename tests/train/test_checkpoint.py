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


# -- damaged checkpoints: one CheckpointError line naming the file, for evaluate and for --resume ------------
@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    from attnkit.train import TrainConfig, Trainer

    from .toy import toy_task

    out = tmp_path_factory.mktemp("run")
    Trainer(toy_task(), TrainConfig(epochs=2, batch_size=8, warmup_steps=2, progress=False)).fit(out)
    return out


def _flip(data: bytes) -> bytes:
    i = len(data) * 2 // 3  # inside the tensor bytes (past the safetensors header), or the JSON body
    return data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:]


DAMAGE = {"truncated": lambda b: b[: len(b) // 2], "zero-byte": lambda b: b"", "bit-flipped": _flip}


def _copy(run_folder, tmp_path):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(run_folder, out)
    return out, ck.resolve(out)


def _uses(out, uses=("evaluate", "resume")):
    """The errors of what evaluate / predict (weights, meta) and --resume (also the trainer state) read."""
    from attnkit.train import TrainConfig, Trainer

    from .toy import toy_task

    errors = []
    for use in uses:
        with pytest.raises(ck.CheckpointError) as e:
            if use == "evaluate":
                f, _ = ck.load_meta(out)
                ck.load_weights(f, toy_task().model)
            else:
                Trainer(toy_task(), TrainConfig(epochs=3, batch_size=8, progress=False)).fit(out, resume=True)
        errors.append(str(e.value))
    return errors


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("name", ["model.safetensors", "trainer.safetensors", "trainer.json"])
def test_damaged_file_is_one_line_naming_it(run_folder, tmp_path, name, damage):
    out, folder = _copy(run_folder, tmp_path)
    path = folder / name
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    errors = _uses(out) if name == "model.safetensors" else _uses(out, ["resume"])
    for msg in errors:
        assert "\n" not in msg and str(path) in msg and "is damaged: its sha256 differs" in msg, msg


@pytest.mark.parametrize("name", ["model.safetensors", "trainer.safetensors", "trainer.json"])
def test_missing_file_is_one_line_naming_it(run_folder, tmp_path, name):
    out, folder = _copy(run_folder, tmp_path)
    (folder / name).unlink()
    errors = _uses(out) if name == "model.safetensors" else _uses(out, ["resume"])
    for msg in errors:
        assert "\n" not in msg and f"{folder / name} is missing" in msg, msg


@pytest.mark.parametrize("edit,msg", [
    (lambda text: "", "is not valid JSON"),
    (lambda text: text[: len(text) // 2], "is not valid JSON"),
    (lambda text: "[1, 2]", "must hold a JSON object, got list"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "task"}), "lacks a valid `task`"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "step"}), "lacks a valid `step`"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "files"}), "lacks a valid `files`"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "format_version"}),
     "no valid `format_version`"),
    (lambda text: json.dumps({**json.loads(text), "files": {"model.safetensors": "abc"}}), "sha256 hex digests"),
    (lambda text: json.dumps({**json.loads(text), "files": {}}), "model.safetensors is not listed in"),
])
def test_invalid_meta_json_is_one_line_naming_it(run_folder, tmp_path, edit, msg):
    out, folder = _copy(run_folder, tmp_path)
    meta = folder / "meta.json"
    meta.write_text(edit(meta.read_text()))
    for err in _uses(out):
        assert "\n" not in err and msg in err and str(folder) in err, err


def test_leftover_temporary_files_are_cleaned_on_save_and_resume(run_folder, tmp_path):
    from attnkit.train import TrainConfig, Trainer

    from .toy import toy_task

    def plant(out):
        junk = [out / ".latest.json.0123abcd.tmp", out / ".best.json.0123abcd.tmp", out / "metrics.jsonl.tmp",
                out / ".tmp-ckpt-00000099-deadbeef"]
        for p in junk[:-1]:
            p.write_text("{")
        junk[-1].mkdir()
        return junk

    junk = plant(tmp_path)
    ck.save_checkpoint(tmp_path, _model(1.0), {"task": "t"}, step=1)
    assert not [p for p in junk if p.exists()]
    out, _ = _copy(run_folder, tmp_path / "resumed")
    junk = plant(out)
    res = Trainer(toy_task(), TrainConfig(epochs=2, batch_size=8, progress=False)).fit(out, resume=True)
    assert res["step"] == 18 and not [p for p in junk if p.exists()]


def test_old_run_folder_with_a_pickle_is_refused_and_its_weights_still_load(run_folder, tmp_path):
    """Format 1 wrote trainer.pt (a pickle): resume refuses it, evaluate / predict still read the weights."""
    out, folder = _copy(run_folder, tmp_path)
    marker = tmp_path / "pwned"
    (folder / "trainer.pt").write_bytes(_evil_pickle(marker))
    for name in ("trainer.json", "trainer.safetensors"):
        (folder / name).unlink()
    meta = json.loads((folder / "meta.json").read_text())
    del meta["files"]
    meta["format_version"] = 1
    (folder / "meta.json").write_text(json.dumps(meta))
    from attnkit.train import TrainConfig, Trainer

    from .toy import toy_task

    with pytest.raises(ck.CheckpointError) as e:
        Trainer(toy_task(), TrainConfig(epochs=3, batch_size=8, progress=False)).fit(out, resume=True)
    assert "trainer.pt is an older attnkit's training state, stored as a pickle" in str(e.value)
    assert "start a new run (--overwrite or another --out)" in str(e.value) and "\n" not in str(e.value)
    model = toy_task(model_seed=5).model
    ck.load_weights(ck.load_meta(out)[0], model)
    from safetensors.torch import load_file

    assert torch.equal(model[0].weight, load_file(str(folder / "model.safetensors"))["0.weight"])
    assert not marker.exists()


def _evil_pickle(marker) -> bytes:
    import pickle

    class Evil:
        def __reduce__(self):
            return exec, (f"open({str(marker)!r}, 'w').write('ran')",)

    return pickle.dumps({"optimizer": Evil()})
