"""The chunked (online-softmax) backend equals dense attention with the materialised bias."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import select_backend
from attnkit.functional.backends import chunked
from attnkit.functional.bias import ALiBiBias, RelativeBias
from attnkit.functional.positional import alibi_slopes

from ._helpers import compare, rand


@pytest.fixture(autouse=True)
def small_tiles(monkeypatch):
    monkeypatch.setattr(chunked, "BLOCK_Q", 16)
    monkeypatch.setattr(chunked, "BLOCK_K", 24)


def _bias(kind, heads, seed):
    if kind == "alibi":
        return ALiBiBias(alibi_slopes(heads).double()), ()
    if kind in ("clip", "t5"):
        table = rand(heads, 9 if kind == "clip" else 12, seed=seed)
        return RelativeBias(table, mode=kind, max_distance=20), (table,)
    return None, ()


@settings(max_examples=30, deadline=None)
@given(lead=st.sampled_from([(2, 3), (1, 2, 3), (2,), ()]), lq=st.integers(1, 70), dl=st.integers(-10, 10),
       mask=st.sampled_from(["none", "causal", "window", "window_causal", "dense"]), pad=st.booleans(),
       bias=st.sampled_from([None, "alibi", "clip", "t5", "tensor"]), seed=st.integers(0, 99))
def test_matches_math(lead, lq, dl, mask, pad, bias, seed):
    lk = max(1, lq + dl)
    heads = lead[-1] if len(lead) >= 2 else 1
    m = {"none": None, "causal": M.causal(), "window": M.window(5, 3), "window_causal": M.window(9, 9) & M.causal(),
         "dense": M.as_mask(torch.rand(lq, lk, generator=torch.Generator().manual_seed(seed)) > 0.3)}[mask]
    if pad and lead:
        lengths = torch.randint(0, lk + 1, (lead[0],), generator=torch.Generator().manual_seed(seed))
        m = M.padding(lengths) if m is None else m & M.padding(lengths)
    if bias == "tensor":
        t = rand(*lead[-1:], lq, lk, seed=seed + 5)
        b, extra = t, (t,)
    else:
        b, extra = _bias(bias, heads, seed)
    q, k, v = rand(*lead, lq, 8, seed=seed), rand(*lead, lk, 8, seed=seed + 1), rand(*lead, lk, 4, seed=seed + 2)
    compare(q, k, v, m, "chunked", bias=b, extra=extra)


def test_fully_masked_rows_zero_and_finite_grads():
    q, k, v = (rand(2, 2, 30, 8, seed=s) for s in range(3))
    out = attnkit.attention(q, k, v, M.padding([0, 30]), bias=ALiBiBias(alibi_slopes(2).double()), backend="chunked")
    assert out[0].abs().max() == 0 and out[1].abs().min() > 0
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_bfloat16_and_float32():
    q, k, v = (rand(1, 4, 100, 16, dtype=torch.float32, seed=s).detach() for s in range(3))
    b = ALiBiBias(alibi_slopes(4))
    ref = attnkit.attention(q, k, v, M.causal(), bias=b, backend="math")
    out32 = attnkit.attention(q, k, v, M.causal(), bias=b, backend="chunked")
    torch.testing.assert_close(out32, ref, atol=1e-5, rtol=1e-4)
    out16 = attnkit.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), M.causal(), bias=b, backend="chunked")
    torch.testing.assert_close(out16.float(), ref, atol=3e-2, rtol=3e-2)


def test_auto_pick_long_structured_bias():
    b = ALiBiBias(alibi_slopes(2))
    long = torch.zeros(1, 2, 2048, 8)
    assert select_backend(long, long, long, M.causal(), b, False) == "chunked"
    assert select_backend(long, long, long, None, b, False) == "chunked"
    short = torch.zeros(1, 2, 128, 8)
    assert select_backend(short, short, short, M.causal(), b, False) == "sdpa"
    assert select_backend(long, long, long, M.causal(), torch.zeros(2, 2048, 2048), False) == "sdpa"  # plain tensor


def test_no_dropout_raises_instead_of_substituting():
    q = torch.randn(1, 2, 20, 8)
    with pytest.raises(ValueError, match="backend 'chunked' has no dropout"):
        attnkit.attention(q, q, q, bias=ALiBiBias(alibi_slopes(2)), backend="chunked", dropout_p=0.3)
    long = torch.zeros(1, 2, 2048, 8)  # the automatic choice then skips its row
    assert select_backend(long, long, long, M.causal(), ALiBiBias(alibi_slopes(2)), dropout_p=0.3) == "sdpa"


def test_bad_bias_heads():
    q = torch.zeros(1, 3, 10, 4)
    with pytest.raises(ValueError, match="bias"):
        attnkit.attention(q, q, q, bias=ALiBiBias(alibi_slopes(4)), backend="chunked")
