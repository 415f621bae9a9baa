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


def check_packed_qkv_views(backend: str) -> None:
    """A native backend on q, k, v views of one packed QKV tensor: equal to math, output written in
    (B, L, H, dh) memory (merging heads is a view), and a length-0 sequence gives zeros, not NaN."""
    from attnkit import masks as M

    b, l, h, dh = 3, 21, 4, 32
    qkv = torch.randn(b, l, 3, h, dh)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, L, dh), strided views
    mask = M.padding(torch.tensor([21, 5, 0]))
    with torch.no_grad():
        out = attnkit.attention(q, k, v, mask, backend=backend)
        ref = attnkit.attention(q.contiguous(), k.contiguous(), v.contiguous(), mask, backend="math")
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)
    assert out.transpose(1, 2).is_contiguous()
    assert (out[2] == 0).all()


def check_other_ranks(backend: str, shape: tuple[int, ...], mask=None) -> None:
    """2-D, 3-D and 5-D inputs give the math path's result."""
    q, k, v = (rand(*shape, dtype=torch.float32, seed=s).detach() for s in range(3))
    with torch.no_grad():
        out = attnkit.attention(q, k, v, mask, backend=backend)
    torch.testing.assert_close(out, attnkit.attention(q, k, v, mask, backend="math"), atol=2e-6, rtol=1e-5)
