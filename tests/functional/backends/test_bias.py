"""Structured biases: dense and tiled views agree, and every backend accepts them."""

from __future__ import annotations

import pytest
import torch

import attnkit
from attnkit import masks as M
from attnkit.functional.bias import ALiBiBias, EdgeBias, RelativeBias, TensorBias, t5_buckets
from attnkit.functional.positional import alibi_bias, alibi_slopes, relative_distances
from attnkit.nn import ALiBi


@pytest.mark.parametrize("lq,lk", [(7, 7), (5, 9), (9, 5)])
def test_alibi_materialize_matches_table_and_tiles(lq, lk):
    b = ALiBiBias(alibi_slopes(4))
    dense = b.materialize(lq, lk)
    torch.testing.assert_close(dense, alibi_bias(alibi_slopes(4), lq, lk))
    torch.testing.assert_close(b.block(1, 4, 2, 5, lq, lk), dense[:, 1:4, 2:5])


def test_relative_clip_and_t5():
    table = torch.randn(3, 2 * 4 + 1)
    b = RelativeBias(table)
    torch.testing.assert_close(b.materialize(6, 8), table[:, relative_distances(6, 8, 4)])
    torch.testing.assert_close(b.block(2, 5, 1, 7, 6, 8), b.materialize(6, 8)[:, 2:5, 1:7])
    rel = torch.arange(-300, 301)
    buckets = t5_buckets(rel, 32, 128)
    assert buckets.min() >= 0 and buckets.max() < 32
    assert (buckets[rel == 0] == 0).all() and buckets[rel == 300] == buckets[rel == 200]  # clipped
    assert (buckets[301:].diff() >= 0).all()  # monotone in the distance
    t5 = RelativeBias(torch.randn(2, 32), mode="t5")
    torch.testing.assert_close(t5.block(3, 9, 0, 4, 10, 10), t5.materialize(10, 10)[:, 3:9, 0:4])


def test_edge_bias_duplicates_add_up():
    ei = torch.tensor([[0, 0, 2], [1, 1, 0]])
    b = EdgeBias(ei, torch.tensor([1.0, 2.0, 5.0]), 3)
    dense = b.materialize(3, 3)
    assert dense.shape == (1, 3, 3) and dense[0, 1, 0] == 3.0 and dense[0, 0, 2] == 5.0
    assert EdgeBias(ei, torch.ones(3, 4), 3).materialize(3, 3).shape == (4, 3, 3)


@pytest.mark.parametrize("backend", ["math", "sdpa", "chunked"])
def test_backends_accept_structured_bias(backend):
    q, k, v = (torch.randn(2, 4, 12, 8) for _ in range(3))
    b = ALiBiBias(alibi_slopes(4))
    out = attnkit.attention(q, k, v, M.causal(), bias=b, backend=backend)
    ref = attnkit.attention(q, k, v, M.causal(), bias=alibi_bias(alibi_slopes(4), 12, 12), backend="math")
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_two_dim_inputs_keep_two_dims():
    q = torch.randn(6, 4)
    out = attnkit.attention(q, q, q, bias=TensorBias(torch.zeros(6, 6)), backend="math")
    assert out.shape == (6, 4)
    out = attnkit.attention(q, q, q, bias=ALiBiBias(alibi_slopes(1)), backend="math")
    assert out.shape == (6, 4)


def test_relative_table_gets_gradients_through_math_and_chunked():
    table = torch.randn(2, 9, requires_grad=True)
    q, k, v = (torch.randn(1, 2, 10, 4) for _ in range(3))
    grads = []
    for backend in ("math", "chunked"):
        out = attnkit.attention(q, k, v, bias=RelativeBias(table), backend=backend)
        grads.append(torch.autograd.grad(out.square().sum(), table)[0])
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)


def test_nn_alibi_returns_structured_bias():
    m = ALiBi(4)
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 7, 8)
    q2, k2, bias = m(q, k)
    assert isinstance(bias, ALiBiBias) and q2 is q and k2 is k
    torch.testing.assert_close(bias.materialize(5, 7), alibi_bias(alibi_slopes(4), 5, 7))


def test_bad_biases():
    with pytest.raises(ValueError, match="slopes"):
        ALiBiBias(torch.ones(2, 2))
    with pytest.raises(ValueError, match="table"):
        RelativeBias(torch.ones(4))
    with pytest.raises(ValueError, match="odd"):
        RelativeBias(torch.ones(2, 4))
    with pytest.raises(ValueError, match="values"):
        EdgeBias(torch.tensor([[0], [1]]), torch.ones(3), 2)
    q = torch.zeros(1, 3, 10, 4)
    with pytest.raises(ValueError, match="heads"):
        attnkit.attention(q, q, q, bias=ALiBiBias(alibi_slopes(4)))
    with pytest.raises(ValueError, match="heads"):
        attnkit.attention(torch.zeros(2, 10, 4), torch.zeros(2, 10, 4), torch.zeros(2, 10, 4),
                          bias=ALiBiBias(alibi_slopes(4)))
