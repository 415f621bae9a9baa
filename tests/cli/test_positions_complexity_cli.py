"""``attnkit positions`` and ``attnkit complexity`` from the command line (small sizes)."""

import re

import pytest

from attnkit.cli.main import main


def test_positions_with_minilm(tmp_path, capsys):
    assert main(["positions", "--out", str(tmp_path), "--length", "24", "--dim", "16", "--delta", "5"]) == 0
    out = capsys.readouterr().out
    err = float(re.search(r"largest error ([\d.e+-]+) over 19 positions x 8 pairs", out).group(1))
    assert err < 1e-12
    near = re.search(r"distance 1: ([\d.]+), 10: ([\d.-]+), 100: ([\d.-]+)", out)
    assert float(near.group(1)) > 0.5 > float(near.group(3))  # MiniLM's neighbours are alike, far ones are not
    for name in ("sinusoidal.png", "distance.png", "rotation.png", "learned.png", "positions.html"):
        assert (tmp_path / name).stat().st_size > 1000 and f"wrote {tmp_path / name}" in out


def test_positions_without_a_model(tmp_path, capsys):
    assert main(["positions", "--out", str(tmp_path), "--length", "8", "--dim", "8", "--model", ""]) == 0
    assert not (tmp_path / "learned.png").exists() and (tmp_path / "positions.html").exists()
    assert main(["positions", "--out", str(tmp_path), "--dim", "7", "--model", ""]) == 1
    assert "`dim` must be even" in capsys.readouterr().err


def test_complexity_prints_the_table_and_exponents(tmp_path, capsys, one_thread):
    assert main(["complexity", "--out", str(tmp_path), "--lengths", "32,64,128", "--dim", "8", "--heads", "2",
                 "--window", "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "| layer | computation (lecture) | sequential ops | max path length |" in out
    exps = dict(re.findall(r"^\s*([\w -]+): time grows like n\^[\d.-]+, memory like n\^([\d.-]+)", out, re.M))
    assert set(exps) == {"convolution", "GRU", "self-attention", "window attention", "linear attention"}
    assert float(exps["self-attention"]) > 1.5 and all(float(v) < 1.2 for k, v in exps.items()
                                                        if k != "self-attention")
    assert (tmp_path / "complexity.png").exists() and (tmp_path / "complexity.md").exists()
    with pytest.raises(SystemExit):
        main(["complexity", "--lengths", "8,x"])
