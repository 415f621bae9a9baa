"""Backend "tiled" (the native CPU kernel) against the math reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import select_backend
from tests.markers import needs_native

from ._helpers import check_other_ranks, check_packed_qkv_views, rand

# every native variant this CPU runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_variant")


def _mask(kind: str, lk: int, batch: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, lk + 1, (batch,), generator=g)
    return {"none": None, "causal": M.causal(), "padding": M.padding(lengths),
            "causal+padding": M.causal() & M.padding(lengths), "window": M.window(3, 5),
            "window+padding": M.window(7, 0) & M.padding(lengths)}[kind]


KINDS = ["none", "causal", "padding", "causal+padding", "window", "window+padding"]


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 3), lq=st.integers(1, 70), dl=st.integers(-10, 10),
       d=st.sampled_from([1, 8, 16, 32, 36]), dv=st.sampled_from([1, 5, 16, 32, 36, 70]), kind=st.sampled_from(KINDS),
       seed=st.integers(0, 99))
def test_inference_matches_math(native_kernel, b, h, lq, dl, d, dv, kind, seed):
    lk = max(1, lq + dl)
    mask = _mask(kind, lk, b, seed)
    q, k = rand(b, h, lq, d, dtype=torch.float32, seed=seed), rand(b, h, lk, d, dtype=torch.float32, seed=seed + 1)
    v = rand(b, h, lk, dv, dtype=torch.float32, seed=seed + 2)
    with torch.inference_mode():
        out = attnkit.attention(q, k, v, mask, backend="tiled")
        ref = attnkit.attention(q, k, v, mask, backend="math")
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)


def test_inference_only_and_raises_instead_of_substituting(native_kernel):
    """Named explicitly, "tiled" runs its kernel or says why not (``local`` has the backward)."""
    q, k, v = (rand(2, 3, 40, 16, dtype=torch.float32, seed=s) for s in range(3))
    with pytest.raises(ValueError, match="backend 'tiled' has no backward"):
        attnkit.attention(q, k, v, M.causal(), backend="tiled")
    with torch.no_grad():
        with pytest.raises(ValueError, match="no dropout"):
            attnkit.attention(q, k, v, M.causal(), backend="tiled", dropout_p=0.2)
        with pytest.raises(ValueError, match="takes float32, bfloat16 inputs here, got float16"):
            attnkit.attention(q.half(), k.half(), v.half(), M.causal(), backend="tiled")


def test_packed_qkv_views_need_no_copy_and_heads_merge_free(native_kernel):
    check_packed_qkv_views("tiled")


@pytest.mark.parametrize("shape", [(9, 16), (2, 9, 16), (2, 2, 2, 9, 16)])
def test_other_ranks(native_kernel, shape):
    check_other_ranks("tiled", shape, M.causal())


def test_bfloat16_close_to_float32_reference(native_kernel):
    q, k, v = (rand(4, 2, 37, 32, dtype=torch.float32, seed=s).detach() for s in range(3))
    mask = M.padding(torch.tensor([37, 20, 1, 30]))
    with torch.no_grad():
        out = attnkit.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, backend="tiled")
        ref = attnkit.attention(q.bfloat16().float(), k.bfloat16().float(), v.bfloat16().float(), mask,
                                backend="math")
    assert out.dtype == torch.bfloat16
    # float32 inside, one rounding at the end: within half a bfloat16 ulp of the float32 result
    torch.testing.assert_close(out.float(), ref.bfloat16().float(), atol=1e-2, rtol=8e-3)


def test_auto_rule(native_kernel):
    q = torch.zeros(8, 12, 35, 32)
    with torch.inference_mode():
        f32 = torch.zeros(8, 12, 24, 32)  # causal masks: no mask or padding alone go to "short" first
        assert select_backend(f32, f32, f32, M.causal() & M.padding(torch.full((8,), 20)), None, False) == "tiled"
        short = torch.zeros(8, 12, 16, 32, dtype=torch.bfloat16)  # bfloat16 with a causal mask ("short" takes
        assert select_backend(short, short, short, M.causal(), None, False) == "tiled"  # only none / padding)
        b16 = q.bfloat16()
        assert select_backend(b16, b16, b16, M.causal(), None, False) == "math_grouped"  # past 16
        assert select_backend(q, q, q, M.causal(), None, False) == "tiled"  # float32 up to 64 keys
        long = torch.zeros(8, 12, 65, 32)
        assert select_backend(long, long, long, M.causal(), None, False) == "sdpa"  # float32 past 64 keys
        assert select_backend(q, q, q, None, None, True) == "math"  # weights asked for
        assert select_backend(q, q, q[..., :8], M.causal(), None, False) == "sdpa"  # dv = 8 measured level
        assert select_backend(q, q, q[..., :8], M.window(3, 3), None, False) == "tiled"  # a window: any head size
    assert select_backend(q.requires_grad_(), q, q, None, None, False) != "tiled"  # training: SDPA's backward


@needs_native
def test_bad_inputs():
    q = torch.zeros(2, 10, 16)
    with pytest.raises(ValueError, match="window / causal / padding"):
        attnkit.attention(q, q, q, M.graph(torch.tensor([[0], [1]]), 10), backend="tiled")
    with pytest.raises(ValueError, match="weights"):
        attnkit.attention(q, q, q, backend="tiled", return_weights=True)
    with pytest.raises(ValueError, match="bias"):
        attnkit.attention(q, q, q, bias=torch.zeros(10, 10), backend="tiled")


def test_head_dim_one_with_any_stride(native_kernel):
    q, k = (torch.randn(2, 3, 1, 10).transpose(-1, -2) for _ in range(2))  # (2, 3, 10, 1), last stride 10
    v = torch.randn(2, 3, 10, 16)
    with torch.no_grad():
        out = attnkit.attention(q, k, v, M.causal(), backend="tiled")
    torch.testing.assert_close(out, attnkit.attention(q, k, v, M.causal(), backend="math"), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("lq", "lk"), [(6, 1), (16, 8), (37, 28), (5, 9)])
def test_more_queries_than_keys(native_kernel, kind, lq, lk):
    """Without a window every query sees every key (subject to causal / padding), whatever Lq - Lk is."""
    q, k = rand(3, 2, lq, 16, dtype=torch.float32, seed=1).detach(), rand(3, 2, lk, 16, dtype=torch.float32, seed=2)
    v = rand(3, 2, lk, 32, dtype=torch.float32, seed=3).detach()
    mask = _mask(kind, lk, 3, lq)
    with torch.no_grad():
        out = attnkit.attention(q, k.detach(), v, mask, backend="tiled")
        ref = attnkit.attention(q, k.detach(), v, mask, backend="math")
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dv", [4, 36, 50])
def test_partial_column_groups_touch_nothing_past_the_head(native_kernel, dtype, dv):
    """A head size that is not a multiple of 16 (the speech model's 36): the last group of columns is read
    and written with masks, so the next head's values (here NaN) never reach the output, and the output's
    own columns match the reference (the (B, L, H, dv) memory holds no gap to write into)."""
    b, h, lq, d = 2, 3, 21, 36
    qkv = torch.randn(b, lq, 3, h, 64, dtype=torch.float32)
    qkv[:, :, :2, :, d:] = float("nan")  # columns past each head: never read
    qkv[:, :, 2, :, dv:] = float("nan")
    q, k, v = (x[..., :dv if i == 2 else d].to(dtype).transpose(1, 2) for i, x in enumerate(qkv.unbind(2)))
    mask = M.window(4, 2) & M.padding(torch.tensor([21, 13]))
    with torch.inference_mode():
        out = attnkit.attention(q, k, v, mask, backend="tiled")
        ref = attnkit.attention(q.float(), k.float(), v.float(), mask, backend="math")
    assert out.shape == (b, h, lq, dv) and out.dtype == dtype
    assert torch.isfinite(out).all()
    tol = dict(atol=2e-6, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-2, rtol=8e-3)
    torch.testing.assert_close(out.float(), ref.to(dtype).float(), **tol)
