"""attention(): backends agree with the math reference; invariants; errors."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import attnkit
from attnkit import masks
from attnkit.functional import attention, explain


def _rand(*shape, dtype=torch.float32, grad=True):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def _fwd_bwd(backend, q, k, v, mask, bias=None):
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    out = attention(q, k, v, mask, bias=bias, backend=backend)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


def _assert_same(a, b, atol=1e-5):
    for x, y in zip(a, b):
        assert torch.isfinite(x).all() and torch.isfinite(y).all()
        torch.testing.assert_close(x, y, atol=atol, rtol=1e-4)


MASK_KINDS = ["none", "causal", "window", "padding", "dense", "padding&causal", "broadcast"]


def _make_mask(kind, b, lq, lk, data):
    if kind == "none":
        return None
    if kind == "causal":
        return masks.causal()
    if kind == "window":
        return masks.window(data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3)))
    lengths = torch.tensor(data.draw(st.lists(st.integers(0, lk), min_size=b, max_size=b)))
    if kind == "padding":
        return masks.padding(lengths)
    if kind == "padding&causal":
        return masks.padding(lengths) & masks.causal()
    if kind == "dense":
        return torch.rand(b, 1, lq, lk) < 0.5  # random, many fully-masked rows
    return torch.rand(lq, lk) < 0.7  # broadcast over batch and heads


@given(data=st.data(), b=st.integers(1, 2), h=st.integers(1, 3), lq=st.integers(1, 9), lk=st.integers(1, 9),
       d=st.sampled_from([1, 4, 8]), dv=st.sampled_from([2, 8]), kind=st.sampled_from(MASK_KINDS))
def test_sdpa_matches_math(data, b, h, lq, lk, d, dv, kind):
    q, k, v = _rand(b, h, lq, d), _rand(b, h, lk, d), _rand(b, h, lk, dv)
    mask = _make_mask(kind, b, lq, lk, data)
    _assert_same(_fwd_bwd("sdpa", q, k, v, mask), _fwd_bwd("math", q, k, v, mask))


@given(data=st.data(), lq=st.integers(1, 6), lk=st.integers(1, 6))
def test_sdpa_matches_math_with_bias(data, lq, lk):
    q, k, v = _rand(2, 2, lq, 4), _rand(2, 2, lk, 4), _rand(2, 2, lk, 4)
    bias = torch.randn(2, lq, lk)
    mask = _make_mask(data.draw(st.sampled_from(MASK_KINDS)), 2, lq, lk, data)
    _assert_same(_fwd_bwd("sdpa", q, k, v, mask, bias), _fwd_bwd("math", q, k, v, mask, bias))


def test_math_gradcheck_float64():
    q, k, v = (_rand(2, 3, 4, dtype=torch.float64) for _ in range(3))
    mask = masks.padding([3, 0]) | masks.causal()  # row with no keys in batch 1 only for non-causal parts
    for m in (None, mask, masks.padding([2, 0])):
        assert torch.autograd.gradcheck(lambda q, k, v, m=m: attention(q, k, v, m, backend="math"), (q, k, v))


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_fully_masked_rows_are_zero_with_finite_grads(backend):
    q, k, v = _rand(2, 2, 3, 4), _rand(2, 2, 5, 4), _rand(2, 2, 5, 4)
    out = attention(q, k, v, masks.padding([0, 2]), backend=backend)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    assert torch.equal(k.grad[0], torch.zeros_like(k.grad[0]))


def test_weights_rows_sum_to_one_or_zero():
    q, k, v = _rand(1, 4, 3), _rand(1, 6, 3), _rand(1, 6, 2)
    out, w = attention(q, k, v, masks.window(0, 0) & masks.padding([3]), return_weights=True)
    assert w.shape == (1, 4, 6)
    torch.testing.assert_close(w.sum(-1), torch.tensor([[0.0, 0.0, 0.0, 0.0]]) + (w.sum(-1) > 0).float())
    # window(0, 0) with queries aligned to the end: query i sees key i + 2 only -> rows 0 sees key 2
    assert w[0, 0, 2] == 1.0 and w[0, 1].sum() == 0.0


def test_default_scale_is_inverse_sqrt_d():
    q, k, v = _rand(1, 2, 16, grad=False), _rand(1, 3, 16, grad=False), _rand(1, 3, 5, grad=False)
    expected = torch.softmax(q @ k.mT / 4.0, -1) @ v
    torch.testing.assert_close(attention(q, k, v), expected)
    torch.testing.assert_close(attention(q, k, v, scale=1.0), torch.softmax(q @ k.mT, -1) @ v)


# ---- invariants -------------------------------------------------------------------------------

@given(n=st.integers(2, 8), seed=st.integers(0, 1000))
def test_permutation_equivariance_without_positions(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, 8, generator=g)
    perm = torch.randperm(n, generator=g)
    out = attention(x, x, x)
    torch.testing.assert_close(attention(x[:, perm], x[:, perm], x[:, perm]), out[:, perm])


@given(n=st.integers(2, 10), t=st.integers(0, 9), seed=st.integers(0, 1000))
def test_no_leakage_through_causal_mask(n, t, seed):
    t = t % n
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, n, 4, generator=g) for _ in range(3))
    k2, v2 = k.clone(), v.clone()
    k2[..., t + 1:, :] += 5.0  # change the future only
    v2[..., t + 1:, :] -= 3.0
    for backend in ("math", "sdpa"):
        a = attention(q, k, v, masks.causal(), backend=backend)
        b = attention(q, k2, v2, masks.causal(), backend=backend)
        torch.testing.assert_close(a[..., : t + 1, :], b[..., : t + 1, :])


@given(n=st.integers(1, 8), extra=st.integers(1, 5), seed=st.integers(0, 1000))
def test_padding_invariance(n, extra, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, 6, generator=g)
    padded = torch.cat([x, torch.randn(1, extra, 6, generator=g) * 100], dim=1)
    ref = attention(x, x, x)
    for backend in ("math", "sdpa"):
        out = attention(padded, padded, padded, masks.padding([n]), backend=backend)
        torch.testing.assert_close(out[:, :n], ref)


@given(n=st.integers(1, 10), left=st.integers(0, 12), right=st.integers(0, 12))
def test_covering_window_equals_full_attention(n, left, right):
    q, k, v = _rand(1, 2, n, 4, grad=False), _rand(1, 2, n, 4, grad=False), _rand(1, 2, n, 4, grad=False)
    w = masks.window(max(left, n), max(right, n))
    torch.testing.assert_close(attention(q, k, v, w), attention(q, k, v))


@given(n=st.integers(1, 8))
def test_complete_graph_equals_full_attention(n):
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    g = masks.graph(torch.stack([src.flatten(), dst.flatten()]), n)
    x = _rand(1, n, 4, grad=False)
    torch.testing.assert_close(attention(x, x, x, g), attention(x, x, x))


# ---- explain --------------------------------------------------------------------------------

def test_explain_matches_lecture_matrices():
    q, k, v = _rand(4, 3, grad=False), _rand(4, 3, grad=False), _rand(4, 2, grad=False)
    ex = explain(q, k, v, score="dot")
    torch.testing.assert_close(ex.scores.T, k @ q.T)  # the lecture's A = K^T Q in column layout
    torch.testing.assert_close(ex.weights, torch.softmax(q @ k.T, -1))
    torch.testing.assert_close(ex.out, ex.weights @ v)
    torch.testing.assert_close(explain(q, k, v).out, attention(q, k, v))


def test_explain_normalisers_and_additive():
    q, k, v = _rand(3, 4, grad=False), _rand(5, 4, grad=False), _rand(5, 2, grad=False)
    m = torch.tensor([[True] * 5, [False] * 5, [True, False] * 2 + [True]])
    relu = explain(q, k, v, m, normalize="relu")
    assert (relu.weights >= 0).all() and relu.weights[1].abs().sum() == 0
    sig = explain(q, k, v, m, normalize="sigmoid")
    assert ((sig.weights > 0) & (sig.weights < 1))[m].all() and (sig.weights[~m] == 0).all()
    wq, wk, wv = torch.randn(6, 4), torch.randn(6, 4), torch.randn(6)
    add = explain(q, k, v, score="additive", additive=(wq, wk, wv))
    manual = torch.tanh((q @ wq.T)[:, None, :] + (k @ wk.T)[None, :, :]) @ wv
    torch.testing.assert_close(add.scores, manual)


# ---- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes, mask, message", [
    (((2, 3, 4), (2, 5, 6), (2, 5, 6)), None, "feature size"),
    (((2, 3, 4), (2, 5, 4), (2, 6, 4)), None, "same length"),
    (((2, 3, 4), (3, 5, 4), (3, 5, 4)), None, "batch dims"),
    (((4,), (5, 4), (5, 4)), None, "`q`"),
    (((2, 3, 4), (2, 5, 4), (2, 5, 4)), torch.ones(3, 4, dtype=torch.bool), r"Lq=3, Lk=5"),
    (((2, 3, 4), (2, 5, 4), (2, 5, 4)), torch.ones(3, 5), "torch.bool"),
    (((2, 3, 4), (2, 5, 4), (2, 5, 4)), masks.padding([1, 2, 3]), "batch has 2"),
    (((2, 3, 4), (2, 5, 4), (2, 5, 4)), masks.padding([1, 7]), "exceeds"),
])
def test_bad_input_raises_before_compute(shapes, mask, message):
    q, k, v = (torch.randn(*s) for s in shapes)
    with pytest.raises(ValueError, match=message):
        attention(q, k, v, mask)


@pytest.mark.parametrize("change, message", [
    (lambda q, k, v, m, b: (q, k.to("meta"), v, m, b), r"one device, got q cpu, k meta, v cpu"),
    (lambda q, k, v, m, b: (q, k, v.to("meta"), m, b), r"one device"),
    (lambda q, k, v, m, b: (q, k, v, masks.padding(torch.tensor([3, 1], device="meta")), b),
     r"padding: `lengths` is on meta but q, k, v are on cpu"),
    (lambda q, k, v, m, b: (q, k, v, torch.ones(3, 5, dtype=torch.bool, device="meta"), b), r"mask is on meta"),
    (lambda q, k, v, m, b: (q, k, v, masks.segments(torch.tensor([5], device="meta")), b), "segments"),
    (lambda q, k, v, m, b: (q, k, v, m, torch.zeros(3, 5, device="meta")), r"`bias` is on meta"),
    (lambda q, k, v, m, b: (q, k, v, torch.ones(3, 2, 3, 5, dtype=torch.bool), b), r"does not broadcast"),
    (lambda q, k, v, m, b: (q, k, v, m, torch.zeros(3, 2, 3, 5)), r"`bias` shape \(3, 2, 3, 5\) does not"),
    (lambda q, k, v, m, b: (q[..., :0], k[..., :0], v, m, b), r"d >= 1"),
    (lambda q, k, v, m, b: (q.double(), k, v, m, b), r"dtypes differ"),
])
def test_devices_sizes_and_dtypes_are_checked_before_any_kernel(change, message):
    """Everything a kernel relies on is a ValueError naming the argument, for every backend (meta tensors
    included: a native kernel never sees them)."""
    q, k, v = torch.randn(2, 2, 3, 16), torch.randn(2, 2, 5, 16), torch.randn(2, 2, 5, 16)
    args = change(q, k, v, None, None)
    for backend in attnkit.available_backends():
        with pytest.raises(ValueError, match=message):
            attention(*args[:4], bias=args[4], backend=backend)


def test_scale_and_two_dim_padding_are_checked():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="`scale` must be a finite number"):
        attention(x, x, x, scale=float("inf"))
    with pytest.raises(ValueError, match="`lengths` has 2 rows but the batch has 1"):
        attention(x, x, x, masks.padding([4, 2]))  # 2-D inputs are one sequence
    torch.testing.assert_close(attention(x, x, x, masks.padding([2])), attention(x[:, :], x[:2], x[:2]))


def test_all_meta_runs_shapes_only_where_a_backend_can():
    q, k, v = (torch.empty(2, 2, 3, 16, device="meta") for _ in range(3))
    assert attention(q, k, v, masks.causal()).shape == (2, 2, 3, 16)  # sdpa, shapes only
    assert attention(q, k, v, backend="math").device.type == "meta"
    with pytest.raises(ValueError, match="needs tensors with data, got the meta device"):
        attention(q, k, v, masks.window(1, 1), backend="local")


def test_unknown_backend_and_weights_from_sdpa():
    x = torch.randn(1, 2, 3)
    with pytest.raises(ValueError, match="unknown backend"):
        attention(x, x, x, backend="nope")
    with pytest.raises(ValueError, match="cannot return weights"):
        attention(x, x, x, backend="sdpa", return_weights=True)
    assert {"math", "sdpa"} <= set(attnkit.available_backends())
