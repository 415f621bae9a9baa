"""add_layer_norm: the native kernel against the math (F.layer_norm(x + r)), and when each runs."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.functional import norm
from attnkit.functional.norm import add_layer_norm, add_norm_kernel_runs

# every native variant this CPU runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_variant")

needs_kernel = pytest.mark.skipif(not add_norm_kernel_runs(torch.float32, 16), reason="native kernel does not run here")


def _inputs(rows, d, dtype, seed, lead=()):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(*lead, rows, d, generator=g) * 3 + 1).to(dtype)
    r = torch.randn(*lead, rows, d, generator=g).to(dtype)
    w = (torch.rand(d, generator=g) + 0.5).to(dtype)
    b = torch.randn(d, generator=g).to(dtype)
    return x, r, w, b


@needs_kernel
@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 300), blocks=st.integers(1, 40), seed=st.integers(0, 2**31 - 1),
       eps=st.sampled_from([1e-12, 1e-5, 1e-1]))
def test_kernel_equals_math_float32(rows, blocks, seed, eps):
    x, r, w, b = _inputs(rows, 16 * blocks, torch.float32, seed)
    got = add_layer_norm(x, r, w, b, eps)
    want = F.layer_norm(x + r, x.shape[-1:], w, b, eps)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-5)


@needs_kernel
@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 300), blocks=st.integers(1, 40), seed=st.integers(0, 2**31 - 1))
def test_kernel_equals_math_bfloat16(rows, blocks, seed):
    """bfloat16 storage, float32 inside: the float32 math on the same bfloat16 inputs, rounded once."""
    x, r, w, b = _inputs(rows, 16 * blocks, torch.bfloat16, seed)
    got = add_layer_norm(x, r, w, b, 1e-12)
    assert got.dtype == torch.bfloat16
    want = F.layer_norm(x.float() + r.float(), x.shape[-1:], w.float(), b.float(), 1e-12)
    torch.testing.assert_close(got.float(), want, atol=1e-6, rtol=2**-8)  # within half a bfloat16 ulp
    # Rounded as torch rounds (to nearest even): float32 sums in another order flip only the rare element
    # that sits at a rounding tie (3.5e-5 of them over 300 random cases, at most 0.04% in one case).
    assert (got != want.to(torch.bfloat16)).sum() <= 1 + got.numel() // 200


@needs_kernel
def test_leading_dimensions_and_constant_rows():
    x, r, w, b = _inputs(7, 32, torch.float32, 0, lead=(2, 3))
    x[0, 0, 0] = 5.0 - r[0, 0, 0]  # ...and one row where x + r is constant: output = bias, no NaN
    x[0, 0, 0, 1:] = 5.0 - r[0, 0, 0, 1:]
    got = add_layer_norm(x, r, w, b, 1e-5)
    assert got.shape == (2, 3, 7, 32) and torch.isfinite(got).all()
    torch.testing.assert_close(got, F.layer_norm(x + r, (32,), w, b, 1e-5), atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(got[0, 0, 0], b)


def test_math_path_when_the_kernel_cannot_run(monkeypatch):
    calls = []
    kernel = norm.native_kernel()
    if kernel is not None:
        class Spy:
            def add_norm(self, *a):
                calls.append(a)
                return kernel.add_norm(*a)

        monkeypatch.setattr(norm, "native_kernel", lambda: Spy())
    x, r, w, b = _inputs(5, 24, torch.float32, 1)  # d = 24: not a multiple of 16
    torch.testing.assert_close(add_layer_norm(x, r, w, b, 1e-5), F.layer_norm(x + r, (24,), w, b, 1e-5))
    x, r, w, b = _inputs(5, 32, torch.float32, 2)
    add_layer_norm(x, r, w, None, 1e-5)  # no bias
    add_layer_norm(x.double(), r.double(), w.double(), b.double(), 1e-5)  # float64
    add_layer_norm(x, r, w, b, 1e-5, native=False)
    assert calls == []
    xg = x.clone().requires_grad_()
    out = add_layer_norm(xg, r, w, b, 1e-5)  # gradients: the math, differentiable
    out.square().sum().backward()
    ref = x.clone().requires_grad_()
    F.layer_norm(ref + r, (32,), w, b, 1e-5).square().sum().backward()
    torch.testing.assert_close(xg.grad, ref.grad)
    assert calls == []
    if kernel is not None:
        with torch.no_grad():
            add_layer_norm(xg, r, w, b, 1e-5)  # the same tensors without gradients: the kernel
        assert len(calls) == 1
