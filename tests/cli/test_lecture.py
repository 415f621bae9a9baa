import numpy as np
import torch

from attnkit.cli import lecture
from attnkit.cli.main import main
from attnkit.viz.lecture import read_lecture_html


def test_lecture_prints_matrices_and_writes_heatmaps(tmp_path, capsys):
    paths = lecture.run(tmp_path, seed=1)
    text = capsys.readouterr().out
    for name in ("Q = W^q I", "K = W^k I", "V = W^v I", "A = K^T Q", "A' = softmax(A)", "O = V A'", "W^o"):
        assert name in text
    assert set(paths) == {"page", "single", "head1", "head2"}
    for k, p in paths.items():
        if k != "page":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 2000
    assert f"wrote {paths['page']}" in text


def test_lecture_page_holds_the_printed_example(tmp_path, capsys):
    """The page's two heads, merged by W^o, give the printed O = W^o [O^1; O^2] (one column per input)."""
    paths = lecture.run(tmp_path, seed=2)
    out = capsys.readouterr().out
    block = out.split("O = W^o [O^1; O^2]")[1].strip().splitlines()[1:]
    printed = np.array([[float(x) for x in line.split()] for line in block if line.startswith("   ")])
    d = read_lecture_html(paths["page"])
    assert d["queries"] == ["a1", "a2", "a3", "a4"] and d["q"].shape == (1, 2, 4, 3)
    assert np.abs(d["o"][0].T - printed).max() < 1e-3 and d["scale"] == 3 ** -0.5


def test_cli_entry_point(tmp_path, capsys):
    assert main(["lecture", "--out", str(tmp_path), "--seed", "3"]) == 0
    assert "O = V A'" in capsys.readouterr().out
    assert main([]) == 2


def test_lecture_columns_sum_to_one(tmp_path, capsys):
    lecture.run(tmp_path)
    out = capsys.readouterr().out
    block = out.split("A' = softmax(A) per column")[1].split("O = V A'")[0].strip().splitlines()[1:]
    cols = torch.tensor([[float(x) for x in line.split()] for line in block]).sum(0)
    torch.testing.assert_close(cols, torch.ones(4), atol=2e-3, rtol=0)
