"""`attnkit train graph` and `attnkit train speech` end to end on tiny generated data."""

from __future__ import annotations

import json

import pytest

from attnkit.cli.main import main
from tests.data.test_fsdd import write_set
from tests.data.test_planetoid import write_tiny

pytestmark = pytest.mark.usefixtures("one_thread")


def test_train_graph_then_evaluate_and_predict(tmp_path, monkeypatch, capsys):
    (tmp_path / "planetoid").mkdir()
    write_tiny(tmp_path / "planetoid")
    out = tmp_path / "run"
    assert main(["train", "graph", "--data-root", str(tmp_path / "planetoid"), "--epochs", "3", "--out", str(out),
                 "--no-progress", "--num-heads", "2", "--d-model", "8", "--value-dropout", "0.5"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["step"] == 3
    meta = json.loads(next(out.glob("ckpt-*/meta.json")).read_text())
    assert meta["model"]["value_dropout"] == 0.5 and result["test"]["count"] == 4  # 4 test nodes scored
    assert (out / "metrics.jsonl").exists() and (out / "best.json").exists()
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path))
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data", "dev"]) == 0
    assert "examples scored: 3" in capsys.readouterr().out  # the 3 validation nodes
    assert main(["predict", str(out), "6"]) == 0
    assert "node 6: class" in capsys.readouterr().out


def test_train_graph_dot_with_edge_loss(tmp_path):
    (tmp_path / "planetoid").mkdir()
    write_tiny(tmp_path / "planetoid")
    out = tmp_path / "run"
    assert main(["train", "graph", "--data-root", str(tmp_path / "planetoid"), "--epochs", "2", "--out", str(out),
                 "--no-progress", "--num-heads", "2", "--d-model", "8", "--score", "dot", "--link-loss", "2",
                 "--link-negatives", "0.5", "--log-every", "1"]) == 0
    meta = json.loads(next(out.glob("ckpt-*/meta.json")).read_text())
    assert meta["model"]["link_loss"] == 2.0 and meta["model"]["link_negatives"] == 0.5
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r["loss"] for r in recs if r["split"] == "train"]
    dev = [r["loss"] for r in recs if r["split"] == "dev"]
    # the training loss carries 2 x the edge loss (about 2 ln 2 at the start); dev is cross-entropy alone
    assert len(train) == 2 and train[0] > dev[0] + 0.5


def test_train_speech_window(tmp_path, capsys):
    write_set(tmp_path / "fsdd" / "recordings", digits=(0, 1))
    out = tmp_path / "run"
    assert main(["train", "speech", "--data", str(tmp_path / "fsdd"), "--window", "2,1", "--epochs", "1",
                 "--batch-size", "8", "--d-model", "16", "--num-heads", "2", "--d-ff", "32",
                 "--num-encoder-layers", "1", "--n-mels", "16", "--out", str(out), "--no-progress"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["test"]["count"] == 2 * 2 * 5  # index 0-4 of every speaker and digit
    capsys.readouterr()
    wav = str(tmp_path / "fsdd" / "recordings" / "1_bob_2.wav")
    assert main(["predict", str(out), wav]) == 0
    assert "1_bob_2.wav: " in capsys.readouterr().out


def test_unparsable_graph_file_is_a_clear_cli_error(tmp_path, capsys):
    write_tiny(tmp_path)
    (tmp_path / "ind.cora.allx").write_bytes(b"garbage")
    assert main(["train", "graph", "--data-root", str(tmp_path), "--epochs", "1", "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 1
    assert "ind.cora.allx does not parse" in capsys.readouterr().err
