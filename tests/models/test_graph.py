"""GAT layers against dense references, sparse vs dense features, and a tiny graph that it learns."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnkit import attention, masks
from attnkit.functional.dropout import dropout16
from attnkit.models.graph import GAT, GraphAttention, GraphAttentionConfig, add_self_loops, feature_dropout, link_pairs

pytestmark = pytest.mark.usefixtures("one_thread")


def ring(n: int) -> torch.Tensor:
    src = torch.arange(n)
    ei = torch.cat([torch.stack([src, (src + 1) % n]), torch.stack([(src + 1) % n, src])], dim=1)
    return add_self_loops(ei, n)


def test_add_self_loops_sorted_unique():
    ei = torch.tensor([[0, 1, 1, 2, 2], [1, 0, 0, 2, 0]])  # a duplicate (1->0) and a loop (2->2)
    out = add_self_loops(ei, 3)
    assert out.tolist() == [[0, 1, 2, 0, 1, 2], [0, 0, 0, 1, 1, 2]]  # sorted by target, then source


def test_additive_layer_matches_dense_gat_formula():
    n, f, h, c = 7, 5, 3, 4
    ei = ring(n)
    layer = GraphAttention(f, c, h, score="additive").eval()
    x = torch.randn(n, f)
    out, w = layer(x, ei, need_weights=True)
    # dense reference: e[t, s] = LeakyReLU(a_dst . Wx_t + a_src . Wx_s), softmax over the neighbours s of t
    v = (x @ layer.lin.weight.T).view(n, h, c)
    a_s, a_d = (v * layer.att_src).sum(-1), (v * layer.att_dst).sum(-1)  # (N, H)
    e = F.leaky_relu(a_d.T[:, :, None] + a_s.T[:, None, :], 0.2)  # (H, N_t, N_s)
    adj = masks.graph(ei, n).materialize(n, n, 2)  # (N_t, N_s)
    alpha = e.masked_fill(~adj, float("-inf")).softmax(-1)  # (H, N, N)
    ref = torch.einsum("hts,shc->thc", alpha, v).reshape(n, h * c) + layer.bias
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, alpha[:, ei[1], ei[0]].T, atol=1e-6, rtol=1e-5)  # per-edge weights (E, H)


def test_dot_layer_matches_math_backend():
    n, f, h, c = 9, 6, 2, 4
    ei = ring(n)
    layer = GraphAttention(f, c, h, score="dot", concat=False).eval()
    x = torch.randn(n, f)
    out, _ = layer(x, ei)
    q, k = (x @ layer.qk.weight.T).view(n, 2, h, c).unbind(1)
    v = (x @ layer.lin.weight.T).view(n, h, c)
    ref = attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), masks.graph(ei, n), backend="math")
    torch.testing.assert_close(out, ref.mean(0) + layer.bias, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score", ["additive", "dot"])
def test_value_dropout_drops_the_aggregated_values(score):
    """Both forms: in training, out = attention over dropout(W x) (same random mask), the scores from
    the undropped W x; in evaluation nothing is dropped. (The dot form once ignored the setting.)"""
    n, f, h, c, p = 9, 6, 2, 4, 0.5
    ei = ring(n)
    layer = GraphAttention(f, c, h, score=score, value_dropout=p)
    plain = GraphAttention(f, c, h, score=score)
    plain.load_state_dict(layer.state_dict())
    x = torch.randn(n, f)
    torch.testing.assert_close(layer.eval()(x, ei)[0], plain.eval()(x, ei)[0])
    layer.train()
    torch.manual_seed(3)
    out, _ = layer(x, ei)
    torch.manual_seed(3)
    v = (x @ layer.lin.weight.T).view(n, h, c)
    dropped = F.dropout(v, p)  # the mask the layer drew
    assert 0 < int((dropped == 0).sum()) < dropped.numel()
    if score == "dot":
        q, k = (x @ layer.qk.weight.T).view(n, 2, h, c).unbind(1)
        ref = attention(q.transpose(0, 1), k.transpose(0, 1), dropped.transpose(0, 1), masks.graph(ei, n),
                        backend="math").transpose(0, 1)  # (N, H, C)
    else:
        a_s, a_d = (v * layer.att_src).sum(-1), (v * layer.att_dst).sum(-1)  # (N, H)
        e = F.leaky_relu(a_d.T[:, :, None] + a_s.T[:, None, :], 0.2)  # (H, N_t, N_s)
        alpha = e.masked_fill(~masks.graph(ei, n).materialize(n, n, 2), float("-inf")).softmax(-1)
        ref = torch.einsum("hts,shc->thc", alpha, dropped)
    torch.testing.assert_close(out, ref.reshape(n, h * c) + layer.bias, atol=1e-5, rtol=1e-5)


def test_dot_layer_projected_qk_matches_math_backend():
    n, f, h, c = 9, 30, 2, 4
    ei = ring(n)
    layer = GraphAttention(f, c, h, score="dot", qk_source="projected").eval()
    assert layer.qk_proj.shape == (h, c, 2 * c)  # 2 H C^2 score parameters, independent of F_in
    assert not hasattr(layer, "qk")
    x = torch.randn(n, f)
    out, _ = layer(x, ei)
    v = (x @ layer.lin.weight.T).view(n, h, c)
    q = torch.stack([v[:, i] @ layer.qk_proj[i, :, :c] for i in range(h)])  # (H, N, C)
    k = torch.stack([v[:, i] @ layer.qk_proj[i, :, c:] for i in range(h)])
    ref = attention(q, k, v.transpose(0, 1), masks.graph(ei, n), backend="math")  # (H, N, C)
    torch.testing.assert_close(out, ref.transpose(0, 1).reshape(n, h * c) + layer.bias, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("score", "qk_source"), [("additive", "input"), ("dot", "input"), ("dot", "projected")])
def test_sparse_features_equal_dense(score, qk_source):
    n = 8
    x = (torch.rand(n, 20) < 0.2).float()
    model = GAT(GraphAttentionConfig(20, 3, hidden=4, heads=2, score=score, qk_source=qk_source)).eval()
    ei = ring(n)
    dense = model(x, ei)
    for sparse in (x.to_sparse(), x.to_sparse_csr()):
        torch.testing.assert_close(model(sparse, ei), dense, atol=1e-5, rtol=1e-5)
    dense.sum().backward()
    assert model.layer1.lin.weight.grad is not None


def test_feature_dropout_sparse_keeps_pattern():
    x = (torch.rand(50, 40) < 0.3).float() * 2.0
    for sp in (x.to_sparse(), x.to_sparse_csr()):
        y = feature_dropout(sp, 0.5, True).to_dense()
        kept = y != 0
        assert not (kept & (x == 0)).any()  # zeros stay zero
        torch.testing.assert_close(y[kept], x[kept] * 2.0)  # survivors scaled by 1 / (1 - p)
        assert 0.3 < kept.sum() / (x != 0).sum() < 0.7
    assert feature_dropout(x, 0.5, False) is x


def test_feature_dropout_dense_is_dropout16():
    x = torch.rand(30, 20) + 0.5
    torch.manual_seed(5)
    y = feature_dropout(x, 0.6, True)
    torch.manual_seed(5)
    torch.testing.assert_close(y, dropout16(x, 0.6))
    assert 0.4 < (y == 0).float().mean() < 0.8


def test_learns_two_communities():
    torch.manual_seed(0)
    n = 40
    y = (torch.arange(n) >= n // 2).long()
    src, dst = torch.randint(0, n, (2, 400))
    same = y[src] == y[dst]
    ei = add_self_loops(torch.stack([src[same], dst[same]]), n)  # edges only inside a community
    x = torch.randn(n, 8) + y[:, None] * 0.5  # weak signal per node, strong signal from neighbours
    train = torch.tensor([0, 1, 2, 20, 21, 22])
    model = GAT(GraphAttentionConfig(8, 2, hidden=4, heads=2, dropout=0.1, attention_dropout=0.1))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(25):
        opt.zero_grad()
        F.cross_entropy(model(x, ei)[train], y[train]).backward()
        opt.step()
    model.eval()
    acc = (model(x, ei).argmax(1) == y).float().mean()
    assert acc >= 0.9


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="`score` must be one of"):
        GraphAttentionConfig(4, 2, score="cosine")
    with pytest.raises(ValueError, match="`qk_source` must be one of"):
        GraphAttentionConfig(4, 2, score="dot", qk_source="keys")
    with pytest.raises(ValueError, match="`dropout` must be in"):
        GraphAttentionConfig(4, 2, dropout=1.0)
    model = GAT(GraphAttentionConfig(4, 2))
    with pytest.raises(ValueError, match=r"`x` must have shape \(N, 4\)"):
        model(torch.randn(3, 5), ring(3))
    with pytest.raises(ValueError, match=r"`edge_index` must have shape \(2, E\)"):
        model(torch.randn(3, 4), torch.zeros(3, 2, dtype=torch.long))


@pytest.mark.parametrize("qk_source", ["input", "projected"])
def test_link_logits_are_the_attention_logits(qk_source):
    """On the edges, a softmax of link_logits over each target's in-edges gives the layer's attention weights."""
    n, f, h, c = 8, 6, 2, 4
    ei = ring(n)
    layer = GraphAttention(f, c, h, score="dot", qk_source=qk_source).eval()
    x = torch.randn(n, f)
    logits = layer.link_logits(x, ei)  # (E, H)
    dense = torch.full((h, n, n), float("-inf"))
    dense[:, ei[1], ei[0]] = logits.T  # (H, N_t, N_s)
    alpha = dense.softmax(-1)
    v = (x @ layer.lin.weight.T).view(n, h, c)
    ref = torch.einsum("hts,shc->thc", alpha, v).reshape(n, h * c) + layer.bias
    torch.testing.assert_close(layer(x, ei)[0], ref, atol=1e-5, rtol=1e-5)


def test_forward_with_link_loss():
    torch.manual_seed(0)
    n = 10
    ei = ring(n)
    cfg = GraphAttentionConfig(5, 3, hidden=4, heads=2, score="dot", link_loss=1.0)
    model = GAT(cfg).eval()
    x = torch.randn(n, 5)
    pos, neg = ei[:, ei[0] != ei[1]], torch.tensor([[0, 3, 5], [5, 8, 1]])
    logits, loss = model(x, ei, link_pairs=(pos, neg))
    torch.testing.assert_close(logits, model(x, ei))  # the classification is unchanged
    # by hand: BCE of each layer's logits (1 on edges, 0 on the random pairs), averaged over layers
    h1 = F.elu(model.layer1(x, ei)[0])
    target = torch.tensor([1.0] * pos.shape[1] + [0.0] * 3)
    pairs = torch.cat([pos, neg], 1)
    ref = torch.stack([F.binary_cross_entropy_with_logits(lay.link_logits(inp, pairs), target[:, None].expand(-1, h))
                       for lay, inp, h in ((model.layer1, x, 2), (model.layer2, h1, 1))]).mean()
    torch.testing.assert_close(loss, ref)
    loss.backward()
    assert model.layer1.qk.weight.grad.abs().sum() > 0 and model.layer2.qk.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="negatives"):
        model(x, ei, link_pairs=(pos, torch.tensor([[0], [n]])))  # node id out of range
    with pytest.raises(ValueError, match="link_loss"):
        GraphAttentionConfig(5, 3, score="additive", link_loss=1.0)
    with pytest.raises(ValueError, match="link_negatives"):
        GraphAttentionConfig(5, 3, score="dot", link_negatives=0)


def test_link_pairs():
    ei = torch.tensor([[0, 1, 2, 2], [1, 0, 2, 0]])  # (2 -> 2) is a self-loop
    pos, neg = link_pairs(ei, 5, 1.5)
    assert pos.tolist() == [[0, 1, 2], [1, 0, 0]]
    assert neg.shape == (2, 4) and int(neg.min()) >= 0 and int(neg.max()) < 5  # round(1.5 * 3) random pairs
