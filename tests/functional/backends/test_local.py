"""The local (window) backend equals dense masked attention, forward and backward."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import select_backend
from attnkit.functional.backends.band import forward as fwd
from attnkit.functional.backends.band.geometry import Geometry

from ._helpers import compare, rand

# every native variant this CPU runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_variant")


@settings(max_examples=40, deadline=None)
@given(lead=st.sampled_from([(), (2,), (2, 3), (1, 2, 2)]), lq=st.integers(1, 150), dl=st.integers(-20, 20),
       left=st.integers(0, 40), right=st.integers(0, 40), causal=st.booleans(), pad=st.booleans(),
       d=st.sampled_from([4, 8]), same_dv=st.booleans(), seed=st.integers(0, 99))
def test_matches_math(lead, lq, dl, left, right, causal, pad, d, same_dv, seed):
    """dv == d runs the fused kernel forward (``forward_fused``), dv != d the blocked matmuls (``forward_blocked``)."""
    lk = max(1, lq + dl)
    mask = M.window(left, right)
    if causal:
        mask = mask & M.causal()
    if pad and lead:
        lengths = torch.randint(0, lk + 1, (lead[0],), generator=torch.Generator().manual_seed(seed))
        mask = mask & M.padding(lengths)
    q, k = rand(*lead, lq, d, seed=seed), rand(*lead, lk, d, seed=seed + 1)
    v = rand(*lead, lk, d if same_dv else 5, seed=seed + 2)
    compare(q, k, v, mask, "local")


@pytest.mark.parametrize("mask", [M.window(5, 9), M.window(5, 9) & M.padding([100, 0]), M.window(50, 0) & M.causal(),
                                  M.window(300, 2) & M.causal()])
def test_inference_path_matches_math(mask):
    q, k, v = (rand(2, 3, 300, 8, dtype=torch.float32, seed=s).detach() for s in range(3))
    with torch.no_grad():
        out = attnkit.attention(q, k, v, mask, backend="local")
        torch.testing.assert_close(out, attnkit.attention(q, k, v, mask, backend="math"), atol=2e-6, rtol=1e-5)


def test_float32_long_and_not_multiple_of_block():
    q, k, v = (rand(1, 2, 1000, 16, dtype=torch.float32, seed=s) for s in range(3))
    compare(q, k, v, M.window(37, 5) & M.causal(), "local", atol=2e-5, rtol=1e-4)


def test_bfloat16_close_to_float32_reference():
    q, k, v = (rand(2, 2, 300, 16, dtype=torch.float32, seed=s).detach() for s in range(3))
    ref = attnkit.attention(q, k, v, M.window(20, 20), backend="math")
    out = attnkit.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), M.window(20, 20), backend="local")
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)


def test_window_covering_everything_is_full_attention():
    q, k, v = (rand(2, 3, 70, 8, seed=s) for s in range(3))
    out = attnkit.attention(q, k, v, M.window(100, 100), backend="local")
    torch.testing.assert_close(out, attnkit.attention(q, k, v, backend="math"))


def test_fully_masked_rows_give_zeros_and_finite_grads():
    q, k, v = (rand(2, 2, 40, 8, seed=s) for s in range(3))
    out = attnkit.attention(q, k, v, M.window(3, 3) & M.padding([0, 20]), backend="local")
    assert out[0].abs().max() == 0
    assert out[1, :, 24:].abs().max() == 0  # queries 24.. see only keys >= 21, all padded
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_dropout_path_is_differentiable_and_unbiased_in_shape():
    q, k, v = (rand(1, 2, 200, 8, dtype=torch.float32, seed=s) for s in range(3))
    torch.manual_seed(0)
    out = attnkit.attention(q, k, v, M.window(10, 10), backend="local", dropout_p=0.5)
    ref = attnkit.attention(q, k, v, M.window(10, 10), backend="local")
    assert out.shape == ref.shape and torch.isfinite(out).all() and not torch.allclose(out, ref)
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_geometry_is_linear_in_length():
    g1, g2 = Geometry(4096, 4096, 128, 128), Geometry(16384, 16384, 128, 128)
    assert g1.W == g2.W and g2.nb == 4 * g1.nb  # band width independent of L


def test_auto_picks_local_for_long_windows_only():
    q = torch.zeros(1, 2, 1024, 8)
    assert select_backend(q, q, q, M.window(16, 16), None, False) == "local"
    assert select_backend(q, q, q, M.window(16, 16) & M.causal() & M.padding([900]), None, False) == "local"
    assert select_backend(q, q, q, M.window(16, 16), None, True) == "math"  # weights requested
    small = torch.zeros(1, 2, 64, 8)
    assert select_backend(small, small, small, M.window(16, 16), None, False) != "local"
    assert select_backend(q, q, q, M.causal(), None, False) != "local"


def test_bad_inputs():
    with pytest.raises(ValueError, match="left"):
        M.window(-1, 2)
    with pytest.raises(ValueError, match="right"):
        M.window(1, -2)
    q = torch.zeros(1, 10, 4)
    with pytest.raises(ValueError, match="window"):
        attnkit.attention(q, q, q, M.causal(), backend="local")
    with pytest.raises(ValueError, match="bias"):
        attnkit.attention(q, q, q, M.window(1, 1), bias=torch.zeros(10, 10), backend="local")


def test_fused_and_matmul_forwards_agree():
    """The two forward paths give the same out and lse, edges and padding included."""
    q, k, v = (rand(2, 3, 200, 8, seed=s).detach() for s in range(3))
    g = Geometry(200, 200, 20, 7)
    kb, vb = g.pad_keys(k.reshape(6, 200, 8)), g.pad_keys(v.reshape(6, 200, 8))
    kbias, band = g.key_bias(torch.tensor([200, 200, 200, 30, 30, 0]), q.device), g.band_bias(q.device)
    scale = 8 ** -0.5
    out1, lse1 = fwd.forward_fused(g, g.pad_queries(q.reshape(6, 200, 8)), kb, vb, kbias, band.double(), scale)
    out2, lse2 = fwd.forward_blocked(g, g.pad_queries(q.reshape(6, 200, 8) * scale), kb, vb, kbias, band.double(), True)
    torch.testing.assert_close(out1, out2)
    torch.testing.assert_close(lse1, lse2)
    assert torch.isinf(lse1[5]).all() and (out1[5] == 0).all()  # a sequence of length 0: no key anywhere


@settings(max_examples=40, deadline=None)
@given(lead=st.sampled_from([(), (2,), (2, 3)]), lq=st.integers(1, 120), dl=st.integers(-20, 20),
       left=st.integers(0, 40), right=st.integers(0, 40), causal=st.booleans(), pad=st.booleans(),
       d=st.sampled_from([1, 8, 16, 32, 48]), dv=st.sampled_from([16, 32, 48, 80]), seed=st.integers(0, 99))
def test_native_float32_matches_math(native_kernel, lead, lq, dl, left, right, causal, pad, d, dv, seed):
    """float32 with dv % 16 == 0 runs the native forward; with d % 16 == 0 too, the native backward."""
    lk = max(1, lq + dl)
    mask = M.window(left, right) & M.causal() if causal else M.window(left, right)
    if pad and lead:
        lengths = torch.randint(0, lk + 1, (lead[0],), generator=torch.Generator().manual_seed(seed))
        mask = mask & M.padding(lengths)
    q, k = rand(*lead, lq, d, dtype=torch.float32, seed=seed), rand(*lead, lk, d, dtype=torch.float32, seed=seed + 1)
    v = rand(*lead, lk, dv, dtype=torch.float32, seed=seed + 2)
    compare(q, k, v, mask, "local", atol=2e-5, rtol=1e-4)


def test_exact_forward_agrees_and_keeps_hidden_nan_out():
    """``forward_exact`` (the path for inputs holding NaN / inf) gives the blocked forward's out and lse on
    finite inputs, and a NaN in a padded key changes nothing."""
    q, k, v = (rand(6, 120, 8, seed=s).detach() for s in range(3))
    lengths = torch.tensor([120, 120, 60, 30, 1, 0])
    g = Geometry(120, 120, 9, 4)
    args = (g.pad_queries(q * 0.3), g.pad_keys(k), g.pad_keys(v))
    out1, lse1 = fwd.forward_exact(g, *args, g.key_ok(lengths, q.device), g.band_ok(q.device))
    out2, lse2 = fwd.forward_blocked(g, *args, g.key_bias(lengths, q.device), g.band_bias(q.device).double(), True)
    torch.testing.assert_close(out1, out2)
    torch.testing.assert_close(lse1, lse2)
    k[3, 40], v[3, 50] = float("nan"), float("inf")  # past row 3's length (30)
    with torch.no_grad():
        out = attnkit.attention(q, k, v, M.window(9, 4) & M.padding(lengths), scale=0.3, backend="local")
    torch.testing.assert_close(out, g.unpad_queries(out1))


def test_native_and_matmul_forwards_agree(native_kernel):
    """The native kernel's out and lse equal the blocked reference, edges, padding and empty rows included."""
    n, lq, lk, d = 6, 203, 190, 32
    q, k, v = (rand(n, L, d, dtype=torch.float32, seed=s).detach() for s, L in enumerate((lq, lk, lk)))
    lengths = torch.tensor([190, 190, 100, 30, 1, 0])
    for left, right in ((20, 7), (0, 0), (300, 0), (5, 400)):
        out1, lse1 = fwd.forward_native(q, k, v, lengths, left, right, 0.2)
        g = Geometry(lq, lk, left, right)
        out2, lse2 = fwd.forward_blocked(g, g.pad_queries(q * 0.2), g.pad_keys(k), g.pad_keys(v),
                                    g.key_bias(lengths, q.device), g.band_bias(q.device), True)
        torch.testing.assert_close(out1, out2.reshape(n, -1, d)[:, :lq], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(lse1, lse2.reshape(n, -1)[:, :lq], atol=1e-6, rtol=1e-5)
        assert torch.isinf(lse1[5]).all() and (out1[5] == 0).all()  # length 0: no key anywhere


def test_native_backward_matches_math_gradients(native_kernel):
    """The kernel's own backward (d, dv multiples of 16), edges, padding and a length-0 row included."""
    n, lq, lk, d, dv = 4, 75, 70, 32, 48
    q, k = rand(n, lq, d, dtype=torch.float32, seed=0), rand(n, lk, d, dtype=torch.float32, seed=1)
    v = rand(n, lk, dv, dtype=torch.float32, seed=2)
    lengths = torch.tensor([70, 33, 1, 0])
    g = torch.randn(n, lq, dv, generator=torch.Generator().manual_seed(3))
    for left, right in ((9, 4), (0, 0), (200, 0)):
        out, lse = fwd.forward_native(q.detach(), k.detach(), v.detach(), lengths, left, right, 0.3)
        got = native_kernel.window_backward(q.detach(), k.detach(), v.detach(), out, g, lse, lengths, left, right, 0.3)
        mask = M.window(left, right) & M.padding(lengths)
        ref = attnkit.attention(q, k, v, mask, scale=0.3, backend="math")
        want = torch.autograd.grad(ref, (q, k, v), g)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)
        assert (got[0][3] == 0).all() and (got[1][3] == 0).all()  # length 0: no gradient anywhere
