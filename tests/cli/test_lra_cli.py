"""`attnkit lra`: generate (LRA's layout), one cell from one command, report; bad settings are one-line errors."""

import json

import pytest

from attnkit.cli.main import main
from attnkit.data.listops import evaluate_listops
from attnkit.lra.settings import SUITES, TaskSettings


def test_generate_listops_in_lra_layout(tmp_path, capsys):
    assert main(["lra", "generate", "listops", "--out", str(tmp_path), "--seed", "4", "--max-length", "80",
                 "--n", "25", "--n-val", "3", "--n-test", "4"]) == 0
    lines = (tmp_path / "basic_train.tsv").read_text().splitlines()
    assert lines[0] == "Source\tTarget" and len(lines) == 26
    for line in lines[1:]:
        src, tgt = line.split("\t")
        assert 20 < len(src.split()) < 80 and evaluate_listops(src) == int(tgt)  # min length: 80 / 4
    assert "25 / 3 / 4 expressions" in capsys.readouterr().out


def test_generate_rejects_impossible_settings(tmp_path, capsys):
    assert main(["lra", "generate", "listops", "--out", str(tmp_path), "--max-depth", "2", "--max-length",
                 "2000"]) == 1
    assert "at most 12 tokens" in capsys.readouterr().err
    assert main(["lra", "generate", "pathfinder", "--out", str(tmp_path), "--contour-length", "50"]) == 1
    assert "more than 3 x size" in capsys.readouterr().err


def test_generate_pathfinder(tmp_path):
    assert main(["lra", "generate", "pathfinder", "--out", str(tmp_path), "--n", "4", "--n-val", "2",
                 "--n-test", "2", "--seed", "1"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pathfinder_test.npz", "pathfinder_train.npz",
                                                         "pathfinder_val.npz"]


def test_generate_mqar_and_its_refusals(tmp_path, capsys):
    from attnkit.data.mqar import IGNORE, read_mqar

    assert main(["lra", "generate", "mqar", "--out", str(tmp_path), "--seq-len", "128", "--num-pairs", "8",
                 "--vocab-size", "30", "--n-train", "5", "--n-val", "2", "--n-test", "3", "--seed", "1"]) == 0
    assert "8 pairs in 128 tokens, 14 keys, 14 values" in capsys.readouterr().out
    tokens, targets = read_mqar(tmp_path / "mqar_train.npz")
    assert tokens.shape == (5, 128) and ((targets != IGNORE).sum(1) == 8).all()
    for argv, message in ((["--seq-len", "128", "--num-pairs", "43"], "more than `seq_len`=128"),
                          (["--num-pairs", "16", "--vocab-size", "20"], "`vocab_size` must be at least 34")):
        assert main(["lra", "generate", "mqar", "--out", str(tmp_path / "x"), *argv]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit):
        main(["lra", "generate", "mqar", "--out", str(tmp_path / "x"), "--seq-len", "-5"])
    assert "argument --seq-len: must be an integer in [3, 65536], got '-5'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_one_cell_one_command_then_report(tmp_path, monkeypatch, capsys, one_thread):
    tiny = TaskSettings("listops", 48, 48, 8, 16, steps=4, batch_size=8, warmup_steps=1, d_model=16, d_ff=32,
                        num_layers=1, pooling="first")
    monkeypatch.setitem(SUITES["quick"], "listops", tiny)
    cell = tmp_path / "cells" / "listops-nystrom"
    assert main(["lra", "cell", "--task", "listops", "--variant", "nystrom", "--suite", "quick", "--seed", "2",
                 "--out", str(cell), "--data-dir", str(tmp_path / "data"),
                 "--results", str(tmp_path / "results.jsonl")]) == 0
    row = json.loads((cell / "cell.json").read_text())
    assert row["variant"] == "nystrom" and row["exact"] is False and row["steps"] == 4
    assert "--seed 2" in row["command"]
    assert "listops x nystrom: test accuracy" in capsys.readouterr().out
    assert main(["lra", "report", str(tmp_path)]) == 0
    assert "| nystrom | no |" in capsys.readouterr().out and (tmp_path / "lra.png").exists()


def test_help_lists_actions(capsys):
    with pytest.raises(SystemExit):
        main(["lra", "--help"])
    out = capsys.readouterr().out
    assert "generate" in out and "run" in out and "cell" in out
