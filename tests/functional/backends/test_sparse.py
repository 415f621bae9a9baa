"""The sparse backend (window / strided / global-token unions) equals the math path, forward and backward."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import get_backend, select_backend
from attnkit.functional.backends.sparse import sparse_pattern

from ._helpers import compare, rand


def _pattern(kind: str, length: int, w: int, s: int, g: int):
    win = M.window(w, max(0, w - 1))
    return {"window": win, "strided": M.strided(s), "global": M.global_tokens(min(g, length)),
            "longformer": win | M.global_tokens(min(g, length)), "sparse_transformer": M.window(s, s) | M.strided(s),
            "all": M.strided(s) | win | M.global_tokens(sorted({0, length - 1}))}[kind]


@settings(max_examples=40, deadline=None)
@given(lead=st.sampled_from([(), (2,), (2, 3), (1, 2, 2)]), length=st.integers(0, 70),
       kind=st.sampled_from(["window", "strided", "global", "longformer", "sparse_transformer", "all"]),
       w=st.integers(0, 9), s=st.integers(1, 9), g=st.integers(1, 3), causal=st.booleans(), pad=st.booleans(),
       dv=st.sampled_from([3, 8]), seed=st.integers(0, 99))
def test_matches_math(lead, length, kind, w, s, g, causal, pad, dv, seed):
    mask = _pattern(kind, max(length, 1), w, s, g)
    if length == 0 and kind in ("global", "longformer", "all"):
        mask = M.window(w, w) | M.strided(s)
    if causal:
        mask = mask & M.causal()
    if pad and lead:
        lengths = torch.randint(0, length + 1, (lead[0],), generator=torch.Generator().manual_seed(seed))
        mask = mask & M.padding(lengths)
    q, k, v = rand(*lead, length, 8, seed=seed), rand(*lead, length, 8, seed=seed + 1), rand(*lead, length, dv,
                                                                                                 seed=seed + 2)
    compare(q, k, v, mask, "sparse")


def test_empty_batch_and_empty_sequence():
    for shape in ((0, 2, 10, 4), (2, 2, 0, 4)):
        q, k, v = (rand(*shape, seed=i) for i in range(3))
        out = compare(q, k, v, M.window(2, 2) | M.strided(3), "sparse")
        assert out.shape == shape


def test_hidden_keys_never_influence_even_nan_and_inf():
    """Keys past the padding length hold NaN / inf: outputs equal those with zeros there, and are finite."""
    q, k, v = (rand(2, 3, 40, 8, seed=s).detach() for s in range(3))
    mask = (M.window(4, 4) | M.strided(5) | M.global_tokens(2)) & M.padding([40, 23])
    clean_k, clean_v = k.clone(), v.clone()
    clean_k[1, :, 23:], clean_v[1, :, 23:] = 0.0, 0.0
    k[1, :, 23:], v[1, :, 23:] = float("nan"), float("inf")
    out = attnkit.attention(q, k, v, mask, backend="sparse")
    ref = attnkit.attention(q, clean_k, clean_v, mask, backend="math")
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)


def test_query_with_nothing_to_attend_gives_zeros_and_finite_grads():
    q, k, v = (rand(2, 2, 30, 8, seed=s) for s in range(3))
    out = attnkit.attention(q, k, v, (M.window(2, 2) | M.global_tokens(1)) & M.padding([0, 30]), backend="sparse")
    assert out[0].abs().max() == 0 and out[1].abs().min() > 0
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_dtypes(dtype):
    q, k, v = (rand(2, 2, 50, 16, dtype=torch.float32, seed=s).detach() for s in range(3))
    mask = M.window(3, 3) | M.strided(7) | M.global_tokens(1)
    ref = attnkit.attention(q, k, v, mask, backend="math")
    out = attnkit.attention(q.to(dtype), k.to(dtype), v.to(dtype), mask, backend="sparse")
    assert out.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(out.float(), ref, atol=tol, rtol=tol)


def test_dropout_keeps_expectation_and_zeroes_hidden():
    q, k, v = (rand(1, 1, 30, 4, seed=s).detach() for s in range(3))
    mask = M.window(2, 2) | M.strided(4)
    ref = attnkit.attention(q, k, v, mask, backend="math")
    torch.manual_seed(0)
    outs = torch.stack([attnkit.attention(q, k, v, mask, backend="sparse", dropout_p=0.3) for _ in range(400)])
    assert not torch.allclose(outs[0], ref)
    torch.testing.assert_close(outs.mean(0), ref, atol=0.12, rtol=0.0)


def test_never_automatic():
    from attnkit.functional.dispatch import RULES

    assert "sparse" not in {r.backend for r in RULES} and get_backend("sparse").exact  # named only
    long = torch.zeros(1, 2, 4096, 8)
    assert select_backend(long, long, long, M.window(32, 32) | M.global_tokens(2)) != "sparse"


def test_pattern_reading():
    p = sparse_pattern((M.window(3, 1) | M.window(1, 5) | M.global_tokens([4, 2])) & M.causal())
    assert (p.left, p.right, p.stride, p.positions, p.causal) == (3, 5, None, (2, 4), True)
    assert sparse_pattern(M.window(2, 2) & M.strided(3)) is None  # an intersection is not a union
    assert sparse_pattern(M.strided(2) | M.strided(3)) is None
    assert sparse_pattern(M.causal()) is None


def test_bad_input_raises():
    q = torch.zeros(1, 10, 4)
    with pytest.raises(ValueError, match="union of window"):
        attnkit.attention(q, q, q, M.causal(), backend="sparse")
    with pytest.raises(ValueError, match="Lq == Lk"):
        attnkit.attention(q, torch.zeros(1, 12, 4), torch.zeros(1, 12, 4), M.strided(2), backend="sparse")
    with pytest.raises(ValueError, match="bias"):
        attnkit.attention(q, q, q, M.strided(2), bias=torch.zeros(10, 10), backend="sparse")
    with pytest.raises(ValueError, match="weights"):
        attnkit.attention(q, q, q, M.strided(2), backend="sparse", return_weights=True)
    with pytest.raises(ValueError, match="past the key length"):
        attnkit.attention(q, q, q, M.global_tokens([12]), backend="sparse")


def test_memory_is_not_quadratic():
    """At L = 4096 with a 64-wide window, 64 stride and 2 global tokens no (L, L) tensor is built."""
    from attnkit.lra.memory import peak_memory

    q, k, v = (torch.randn(1, 1, 4096, 16) for _ in range(3))
    mask = M.window(32, 32) | M.strided(64) | M.global_tokens(2)
    with torch.no_grad():
        _, mb = peak_memory(lambda: attnkit.attention(q, k, v, mask, backend="sparse"))
    if mb is None:
        pytest.skip("peak memory is not measurable here")
    assert mb < 4096 * 4096 * 4 / 2**20 / 2  # under half of one float32 (L, L) matrix (64 MB)
