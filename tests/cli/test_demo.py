"""``attnkit demo`` is bounded by steps: the same seed gives the same numbers, to the last digit."""

import json

import pytest
import torch
from safetensors.torch import load_file

from attnkit.cli import demo
from attnkit.cli.main import main
from attnkit.cli.train import floor


def _weights(out):
    return load_file(str(out / json.loads((out / "latest.json").read_text())["path"] / "model.safetensors"))


def test_two_same_seed_demo_runs_are_identical(tmp_path, capsys):
    a = demo.run(tmp_path / "a", epochs=2, progress=False)
    b = demo.run(tmp_path / "b", epochs=2, progress=False)
    assert a["step"] == b["step"] == 42 and a["complete"]
    assert a["test"] == b["test"] and a["best_dev"] == b["best_dev"]  # accuracy and loss, every digit
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == f"test accuracy: {floor(a['test']['accuracy'])} (last checkpoint)"
    assert "stopped early" not in out


def test_demo_replaces_its_own_run_and_leaves_other_runs_alone(tmp_path, capsys):
    out = tmp_path / "d"
    first = demo.run(out, epochs=1, progress=False)
    second = demo.run(out, epochs=1, progress=False)  # make demo twice: the second replaces the first
    assert first["test"] == second["test"] and sorted(p.name for p in out.glob("ckpt-*")) == ["ckpt-00000021"]
    other = tmp_path / "other"
    assert main(["train", "image", "--dataset", "digits", "--max-steps", "2", "--d-model", "16", "--num-heads", "2",
                 "--d-ff", "32", "--num-encoder-layers", "1", "--out", str(other), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["demo", "--out", str(other), "--epochs", "1"]) == 1
    assert "holds another run" in capsys.readouterr().err and (other / "ckpt-00000002").exists()
    (other / "attention_test0.png").write_bytes(b"")  # what an older attnkit's demo left (runs were not marked)
    assert demo.run(other, epochs=1, progress=False)["test"] == first["test"]


def test_demo_says_when_the_safety_limit_cut_it_short(tmp_path, capsys):
    res = demo.run(tmp_path / "d", epochs=2, progress=False, max_minutes=1e-6)
    out = capsys.readouterr().out
    assert res["time_budget_reached"] and res["step"] == 1
    assert "stopped early by the 1e-06-minute safety limit" in out and "test accuracy:" in out


@pytest.mark.parametrize("argv", [["demo", "--help"]])
def test_demo_help_lists_its_options(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    text = capsys.readouterr().out
    assert "--max-minutes" in text and "safety stop" in text and "--no-progress" in text
