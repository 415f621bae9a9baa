"""``predict --attention`` for a graph run: each node's attention over its neighbours, per head and layer,
read from the layers' public calls and equal to what the model computes."""

from __future__ import annotations

import pytest
import torch

from attnkit.cli.main import main
from attnkit.models.graph import GAT, GraphAttentionConfig, add_self_loops
from attnkit.tasks.graph import node_attention
from tests.data.test_planetoid import write_tiny


@pytest.mark.parametrize("score", ["additive", "dot"])
def test_node_attention_is_the_models_own(score):
    torch.manual_seed(0)
    model = GAT(GraphAttentionConfig(6, 3, hidden=4, heads=2, out_heads=1, score=score)).eval()
    x = torch.randn(7, 6)
    ei = add_self_loops(torch.tensor([[0, 1, 2, 3, 4, 5, 6, 0], [1, 2, 3, 4, 5, 6, 0, 3]]), 7)
    found = node_attention(model, x, ei, [3, 0])
    torch.testing.assert_close(found["logits"], model(x, ei))
    src, (w1, w2) = found[3]
    assert sorted(src.tolist()) == [0, 2, 3]  # edges into node 3, itself included
    assert w1.shape == (2, 3) and w2.shape == (1, 3)
    torch.testing.assert_close(w1.sum(1), torch.ones(2)) and torch.testing.assert_close(w2.sum(1), torch.ones(1))
    if score == "additive":  # the layer's own weights of those edges
        _, edge_w = model.layer1(x, ei, need_weights=True)
        torch.testing.assert_close(w1, edge_w[ei[1] == 3].T)


def test_predict_draws_each_nodes_attention(tmp_path, monkeypatch, capsys):
    (tmp_path / "planetoid").mkdir()
    write_tiny(tmp_path / "planetoid")
    out = tmp_path / "run"
    assert main(["train", "graph", "--data-root", str(tmp_path / "planetoid"), "--epochs", "2", "--out", str(out),
                 "--no-progress", "--num-heads", "2", "--d-model", "8"]) == 0
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path))
    capsys.readouterr()
    assert main(["predict", str(out), "6", "2", "--attention", str(tmp_path / "maps")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("node 6: class") and lines[1] == f"wrote {tmp_path / 'maps' / 'attention_node6.png'}"
    assert lines[3] == f"wrote {tmp_path / 'maps' / 'attention_node2.png'}"
    assert (tmp_path / "maps" / "attention_node2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
