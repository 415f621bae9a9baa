"""The native kernel's loader: without a build, everything still works through the PyTorch paths."""

from __future__ import annotations

import pytest
import torch

import attnkit
from attnkit import masks as M
from attnkit.functional import select_backend
from attnkit.functional.backends import native


@pytest.fixture
def no_kernel(monkeypatch):
    """Make the build fail (as with no compiler), then restore the real, cached kernel afterwards."""
    import torch.utils.cpp_extension as ext

    def fail(*args, **kwargs):
        raise RuntimeError("Ninja is required to load C++ extensions")

    native.window_kernel.cache_clear()
    monkeypatch.setattr(ext, "load", fail)
    yield
    monkeypatch.undo()
    native.window_kernel.cache_clear()


def test_failed_build_warns_once_and_falls_back(no_kernel):
    if not native._cpu_ok():
        pytest.skip("no AVX-512: the loader never tries to build")
    with pytest.warns(RuntimeWarning, match="Ninja is required"):
        assert native.window_kernel() is None
    assert native.window_kernel() is None  # cached: no second warning, no second build
    q, k, v = (torch.randn(2, 2, 700, 16) for _ in range(3))
    mask = M.window(20, 20) & M.padding(torch.tensor([700, 300]))
    with torch.no_grad():
        assert select_backend(q, k, mask, None, False) == "local"
        out = attnkit.attention(q, k, v, mask)  # local's PyTorch forward
        torch.testing.assert_close(out, attnkit.attention(q, k, v, mask, backend="math"), atol=2e-6, rtol=1e-5)
        short = q[:, :, :20]
        assert select_backend(short, short, None, None, False) != "tiled"  # the auto rule needs the kernel
        out = attnkit.attention(short, short, short, M.causal(), backend="tiled")  # still works, in PyTorch
        ref = attnkit.attention(short, short, short, M.causal(), backend="math")
        torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)
