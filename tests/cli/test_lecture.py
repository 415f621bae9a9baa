import torch

from attnkit.cli import lecture
from attnkit.cli.main import main


def test_lecture_prints_matrices_and_writes_heatmaps(tmp_path, capsys):
    paths = lecture.run(tmp_path, seed=1)
    text = capsys.readouterr().out
    for name in ("Q = W^q I", "K = W^k I", "V = W^v I", "A = K^T Q", "A' = softmax(A)", "O = V A'", "W^o"):
        assert name in text
    assert set(paths) == {"single", "head1", "head2"}
    for p in paths.values():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 2000


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
