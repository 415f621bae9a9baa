"""The graph backend equals dense attention with the adjacency mask; its building blocks."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import select_backend
from attnkit.functional.backends.graph import check_edge_index, edge_attention, segment_softmax
from attnkit.functional.bias import EdgeBias

from ._helpers import compare, rand


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 12))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40))
    if draw(st.booleans()):  # self-loops and duplicates
        pairs += [(i, i) for i in range(0, n, 2)] + pairs[:3]
    ei = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).T.contiguous()  # (2, E)
    return n, ei


@settings(max_examples=40, deadline=None)
@given(g=graphs(), lead=st.sampled_from([(), (2,), (2, 3)]), bias=st.sampled_from([None, "edge", "edge_heads"]),
       seed=st.integers(0, 99))
def test_matches_math(g, lead, bias, seed):
    n, ei = g
    q, k, v = rand(*lead, n, 4, seed=seed), rand(*lead, n, 4, seed=seed + 1), rand(*lead, n, 3, seed=seed + 2)
    extra = ()
    if bias == "edge_heads" and len(lead) == 2:
        val = rand(ei.shape[1], lead[-1], seed=seed + 3)
        bias, extra = EdgeBias(ei, val, n), (val,)
    elif bias is not None:
        val = rand(ei.shape[1], seed=seed + 3)
        bias, extra = EdgeBias(ei, val, n), (val,)
    out = compare(q, k, v, M.graph(ei, n), "graph", bias=bias, extra=extra)
    isolated = torch.ones(n, dtype=torch.bool)
    isolated[ei[1]] = False
    if isolated.any():
        assert out[..., isolated, :].abs().max() == 0


def test_complete_graph_is_full_attention():
    n = 10
    ei = torch.cartesian_prod(torch.arange(n), torch.arange(n)).T.contiguous()  # (2, n*n)
    q, k, v = (rand(2, 3, n, 8, seed=s) for s in range(3))
    out = attnkit.attention(q, k, v, M.graph(ei, n), backend="graph")
    torch.testing.assert_close(out, attnkit.attention(q, k, v, backend="math"))


def test_isolated_nodes_zero_and_finite_grads():
    ei = torch.tensor([[0, 1], [1, 1]])  # only node 1 has incoming edges
    q, k, v = (rand(5, 4, seed=s) for s in range(3))
    out = attnkit.attention(q, k, v, M.graph(ei, 5))
    assert out[[0, 2, 3, 4]].abs().max() == 0 and out[1].abs().max() > 0
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_segment_softmax_groups_sum_to_one():
    scores = torch.tensor([[1.0, 0.0], [2.0, float("-inf")], [3.0, 5.0], [0.5, 0.5]])  # (E=4, H=2)
    index = torch.tensor([0, 0, 2, 2])
    w = segment_softmax(scores, index, 4)
    sums = torch.zeros(4, 2).index_add(0, index, w)
    torch.testing.assert_close(sums[[0, 2]], torch.ones(2, 2))
    torch.testing.assert_close(w[0, 0], torch.tensor(1 / (1 + torch.e)))  # e^1 / (e^1 + e^2)
    assert w[1, 1] == 0 and w[0, 1] == 1  # -inf gets weight 0


def test_edge_attention_matches_dense_gat_style_reference():
    n, h, dv = 6, 2, 3
    ei = torch.tensor([[0, 1, 2, 3, 4, 5, 0], [1, 1, 1, 2, 2, 5, 5]])
    scores = torch.nn.functional.leaky_relu(torch.randn(ei.shape[1], h), 0.2)  # (E, H)
    v = torch.randn(n, h, dv)
    out = edge_attention(scores, v, ei)
    dense = torch.full((h, n, n), float("-inf"))
    dense[:, ei[1], ei[0]] = scores.T
    w = torch.nan_to_num(dense.softmax(-1))  # rows without edges -> 0
    ref = torch.einsum("hts,shd->thd", w, v)
    torch.testing.assert_close(out, ref)
    assert out[[0, 3, 4]].abs().max() == 0


def test_auto_and_dropout():
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    q = torch.randn(2, 3, 4)
    assert select_backend(q, q, q, M.graph(ei, 3), None, False) == "graph"
    assert select_backend(q, q, q, M.graph(ei, 3), None, True) == "math"
    out = attnkit.attention(q, q, q, M.graph(ei, 3), dropout_p=0.5)
    assert torch.isfinite(out).all()


def test_bad_edge_index():
    with pytest.raises(ValueError, match="edge_index"):
        M.graph(torch.tensor([[0, 5]]), 3)  # wrong shape
    with pytest.raises(ValueError, match="edge_index"):
        M.graph(torch.tensor([[0.0], [1.0]]), 3)  # wrong dtype
    with pytest.raises(ValueError, match="edge_index"):
        M.graph(torch.tensor([[0], [3]]), 3)  # out of range
    with pytest.raises(ValueError, match="edge_index"):
        check_edge_index(torch.tensor([[-1], [0]]), 3)
    with pytest.raises(ValueError, match="scores"):
        edge_attention(torch.zeros(2, 2), torch.zeros(3, 2, 4), torch.tensor([[0], [1]]))
    with pytest.raises(ValueError, match="graph"):
        q = torch.zeros(4, 2)
        attnkit.attention(q, q, q, M.window(1, 1), backend="graph")


def test_dense_and_structured_biases_read_at_the_edges():
    from attnkit.functional.bias import ALiBiBias
    from attnkit.functional.positional import alibi_slopes

    ei = torch.tensor([[0, 1, 2, 2, 3, 5, 5, 8, 0], [1, 1, 3, 3, 4, 4, 0, 8, 1]])
    for lead, bias in [((2, 3), rand(3, 9, 9, seed=7)), ((), rand(9, 9, seed=8)),
                       ((2, 3), ALiBiBias(alibi_slopes(3).double()))]:
        q, k, v = (rand(*lead, 9, 4, seed=s) for s in range(3))
        extra = (bias,) if isinstance(bias, torch.Tensor) else ()
        compare(q, k, v, M.graph(ei, 9), "graph", bias=bias, extra=extra)
