"""The NaN / inf policy and empty sizes, backend by backend (the fuzz test draws the same at random)."""

from __future__ import annotations

import pytest
import torch

import attnkit
from attnkit import masks as M
from attnkit.functional import native
from attnkit.functional.policy import finite, visible_product

LENGTHS = torch.tensor([20, 7])
EDGES = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6, 6]])  # nodes 7.. and 0 see nothing
MASKS = {  # per backend: a mask it takes that hides keys 7.. of batch row 1 (and, for graph, more)
    "math": M.padding(LENGTHS), "sdpa": M.padding(LENGTHS), "math_grouped": M.padding(LENGTHS),
    "chunked": M.padding(LENGTHS) & M.causal(), "local": M.window(30, 30) & M.padding(LENGTHS),
    "tiled": M.padding(LENGTHS) & M.causal(), "short": M.padding(LENGTHS), "graph": M.graph(EDGES, 20),
    "linear_approx": M.padding(LENGTHS),
}
NATIVE = {"short", "tiled"}
BACKENDS = [pytest.param(b, marks=pytest.mark.skipif(b in NATIVE and native.kernel() is None,
                                                      reason="needs the native kernel")) for b in MASKS]


def _qkv(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 2, 20, 16, generator=g).to(dtype) for _ in range(3))


def _run(backend, q, k, v, mask="default"):
    with torch.no_grad():
        return attnkit.attention(q, k, v, MASKS[backend] if mask == "default" else mask, backend=backend)


def _visible(backend):
    return MASKS[backend].materialize(20, 20, 4).expand(2, 2, 20, 20)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hidden_nan_or_inf_never_reaches_the_output(backend):
    q, k, v = _qkv()
    clean = _run(backend, q, k, v)
    for value in (float("nan"), float("inf"), float("-inf")):
        k2, v2 = k.clone(), v.clone()
        k2[1, :, 12, 3] = value  # key 12 of batch row 1: past its length (graph: no edge from node 12)
        v2[1, :, 15] = value
        out = _run(backend, q, k2, v2)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out, clean, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_seen_nan_reaches_exactly_the_rows_that_see_it(backend):
    q, k, v = _qkv(1)
    clean = _run(backend, q, k, v)
    q2, v2 = q.clone(), v.clone()
    q2[0, 1, 5, 0] = float("nan")  # query 5 of (0, head 1): its row, and only its row
    v2[0, 0, 6, 2] = float("nan")  # value 6 of (0, head 0), feature 2: the rows that see key 6
    out = _run(backend, q2, k, v2)
    assert torch.isnan(out[0, 1, 5]).all()
    sees = _visible(backend)[0, 0, :, 6]  # (Lq,) rows of (0, head 0) that see key 6
    assert torch.isnan(out[0, 0, sees, 2]).all() and torch.isfinite(out[0, 0, ~sees, 2]).all()
    untouched = torch.ones(2, 2, 20, dtype=torch.bool)
    untouched[0, 1, 5] = False
    untouched[0, 0, sees] = False
    torch.testing.assert_close(out[untouched], clean[untouched], atol=1e-6, rtol=1e-5)
    if attnkit.functional.get_backend(backend).exact:
        ref = _run("math", q2, k, v2, MASKS[backend])
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_query_with_nothing_to_attend_to_gets_zeros(backend):
    q, k, v = _qkv(2)
    q[0, 0, 0] = float("nan")  # even with NaN in that query
    visible = _visible(backend)
    mask = MASKS[backend] & M.padding(torch.tensor([0, 20])) if backend != "graph" else MASKS[backend]
    out = _run(backend, q, k, v, mask)
    empty = ~(visible & mask.materialize(20, 20, 4)).any(-1)  # (2, 2, 20)
    assert empty.any() and (out[empty] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(2, 2, 0, 20), (2, 2, 20, 0), (0, 2, 20, 20)])
def test_empty_sizes(backend, shape):
    b, h, lq, lk = shape
    q, k, v = torch.randn(b, h, lq, 16), torch.randn(b, h, lk, 16), torch.randn(b, h, lk, 16)
    if backend == "graph" and lq != lk:
        q, k, v = q[..., :0, :], k[..., :0, :], v[..., :0, :]  # a graph has Lq = Lk
    mask = {"local": M.window(3, 3), "graph": M.graph(torch.zeros(2, 0, dtype=torch.long), q.shape[-2]),
            "tiled": M.causal()}.get(backend)
    out = _run(backend, q, k, v, mask)
    assert out.shape == (*q.shape[:-1], 16) and (out == 0).all()


def test_float16_scores_are_safe_in_both_grad_modes():
    """Large float16 scores (past 65504) are computed in float32 whatever backend the grad mode leads to."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 40, 64, generator=g).half() * s for s in (40, 40, 1))
    ref = attnkit.attention(q.float(), k.float(), v.float())
    with torch.no_grad():
        picked_inference = attnkit.functional.select_backend(q, k, v)
        inference = attnkit.attention(q, k, v)
    training = attnkit.attention(q.requires_grad_(), k, v)
    assert picked_inference != attnkit.functional.select_backend(q, k, v)  # really two backends
    for out in (inference, training, attnkit.attention(q, k, v, backend="math")):
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


def test_visible_product_is_the_ieee_sum_over_visible_pairs():
    w = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    v = torch.tensor([[1.0, 2.0], [float("nan"), 3.0], [float("inf"), 4.0]])
    visible = torch.tensor([[True, True, False], [True, False, False], [False, False, True]])
    out = visible_product(w, v, visible)
    assert torch.isnan(out[0, 0]) and out[0, 1] == 2.5  # sees the NaN (weight 0.5)
    assert out[1].tolist() == [1.0, 2.0]  # hides both non-finite values
    assert torch.isnan(out[2, 0]) and out[2, 1] == 0.0  # sees inf with a weight of 0: 0 * inf is NaN
    assert torch.equal(visible_product(w, v.nan_to_num(0, 0, 0), visible), w @ v.nan_to_num(0, 0, 0))
    assert finite(v[:1]) and not finite(v) and not finite(-v[1:]) and finite(torch.empty(3, device="meta"))
    assert finite(torch.full((4,), 6e4, dtype=torch.float16))  # its float16 sum would overflow


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sdpa_gives_a_row_with_an_inf_score_nan_in_low_precision(dtype):
    """torch's CPU kernel returns zeros for this row (its scores hold +inf and -inf); softmax gives NaN."""
    g = torch.Generator().manual_seed(4016)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g, dtype=torch.float64).to(dtype) for n in (4, 16, 16))
    q[0, 0, 0, 0] = float("inf")
    out = attnkit.attention(q, k, v, backend="sdpa")
    assert torch.isnan(out[0, 0, 0]).all()
    assert torch.isfinite(out.flatten(0, 2)[1:]).all()  # every other row is a number
    torch.testing.assert_close(out, attnkit.attention(q, k, v, backend="math"), equal_nan=True)
