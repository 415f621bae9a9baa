"""The grouped math backend equals the math reference, and is the automatic choice only where measured faster."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import dispatch, select_backend
from attnkit.functional.backends import grouped

from ._helpers import compare, rand


@pytest.fixture(autouse=True)
def small_groups(monkeypatch):
    monkeypatch.setattr(grouped, "GROUP_BYTES", 4096)  # a few rows per group, so groups really split


@settings(max_examples=30, deadline=None)
@given(lead=st.sampled_from([(5, 3), (4, 1, 2), (7,), (1, 2)]), lq=st.integers(1, 20), dl=st.integers(-5, 5),
       mask=st.sampled_from(["none", "causal", "window", "dense", "batch_dense"]), pad=st.booleans(),
       bias=st.booleans(), seed=st.integers(0, 99))
def test_matches_math(lead, lq, dl, mask, pad, bias, seed):
    lk = max(1, lq + dl)
    g = torch.Generator().manual_seed(seed)
    m = {"none": None, "causal": M.causal(), "window": M.window(3, 1),
         "dense": M.as_mask(torch.rand(lq, lk, generator=g) > 0.4),
         "batch_dense": M.as_mask(torch.rand(lead[0], *([1] * (len(lead) - 1)), lq, lk, generator=g) > 0.4)}[mask]
    if pad:
        lengths = torch.randint(0, lk + 1, (lead[0],), generator=g)  # some rows may have no key at all
        m = M.padding(lengths) if m is None else m & M.padding(lengths)
    b = rand(lq, lk, seed=seed + 7) if bias else None
    q, k, v = rand(*lead, lq, 6, seed=seed), rand(*lead, lk, 6, seed=seed + 1), rand(*lead, lk, 3, seed=seed + 2)
    compare(q, k, v, m, "math_grouped", bias=b, extra=(b,) if bias else ())


def test_bfloat16_close_to_float32_and_empty_rows_zero():
    q, k, v = (torch.randn(6, 4, 30, 16) for _ in range(3))
    lengths = torch.tensor([30, 0, 12, 1, 29, 30])
    ref = attnkit.attention(q, k, v, M.padding(lengths), backend="math")
    with torch.inference_mode():
        out = attnkit.attention(*(t.bfloat16() for t in (q, k, v)), M.padding(lengths), backend="math_grouped")
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    assert out[1].abs().max() == 0
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)


def test_automatic_only_for_short_low_precision_inference():
    q = torch.randn(2, 3, 40, 8, dtype=torch.bfloat16)
    with torch.inference_mode():
        assert select_backend(q, q, q, None, None, False) == "math_grouped"
        assert select_backend(q.float(), q.float(), q.float(), None, None, False) == "sdpa"  # float32: SDPA is faster
        long = torch.randn(1, 1, dispatch.GROUPED_MAX_LEN + 1, 8, dtype=torch.bfloat16)
        assert select_backend(long, long, long, None, None, False) == "sdpa"
        assert select_backend(q, q, q, None, torch.zeros(40, 40), False) == "sdpa"
    assert select_backend(q, q, q, None, None, False) == "sdpa"  # autograd on: not measured, not chosen


def test_no_weights():
    q = torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match="math_grouped"):
        attnkit.attention(q, q, q, return_weights=True, backend="math_grouped")
