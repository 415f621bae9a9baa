"""Shared helpers: compare a backend with the math reference, forward and gradients."""

from __future__ import annotations

import torch

import attnkit


def rand(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()


def compare(q, k, v, mask, backend, bias=None, extra=(), atol=1e-9, rtol=1e-7):
    """Assert backend == math on outputs and on grads of q, k, v (and ``extra`` leaves)."""
    leaves = (q, k, v, *extra)
    out = attnkit.attention(q, k, v, mask, bias=bias, backend=backend)
    ref = attnkit.attention(q, k, v, mask, bias=bias, backend="math")
    assert out.shape == ref.shape
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    got = torch.autograd.grad(out, leaves, g, allow_unused=True)
    want = torch.autograd.grad(ref, leaves, g, allow_unused=True)
    for a, b in zip(got, want):
        if b is None:
            assert a is None or not a.abs().any()
            continue
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol)
    return out
