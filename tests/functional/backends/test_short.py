"""Backend "short" (the native kernel for short full attention) against the math reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import dispatch, native, select_backend
from attnkit.functional.backends import short
from attnkit.functional.backends.math import math_attention
from tests.markers import needs_native

from ._helpers import check_other_ranks, check_packed_qkv_views, rand

# every native variant this CPU runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_variant")


@pytest.fixture(scope="module")
def bf16_kernel(native_kernel):
    if torch.bfloat16 not in short.kernel_dtypes():
        pytest.skip("this CPU has no AVX512-BF16")
    return native_kernel


def _inputs(b, h, lq, lk, d, dv, dtype, seed):
    q, k, v = (rand(b, h, n, e, dtype=torch.float32, seed=seed + i).detach()
               for i, (n, e) in enumerate(((lq, d), (lk, d), (lk, dv))))
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _padding(lk, b, seed, use):
    if not use:
        return None
    return M.padding(torch.randint(0, lk + 1, (b,), generator=torch.Generator().manual_seed(seed)))


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 3), lq=st.integers(1, 150), lk=st.integers(1, 150),
       d=st.sampled_from([16, 32, 64]), dv=st.sampled_from([16, 32, 48]), pad=st.booleans(), seed=st.integers(0, 99))
def test_float32_matches_math(native_kernel, b, h, lq, lk, d, dv, pad, seed):
    q, k, v = _inputs(b, h, lq, lk, d, dv, torch.float32, seed)
    mask = _padding(lk, b, seed, pad)
    with torch.inference_mode():
        out = attnkit.attention(q, k, v, mask, backend="short")
        ref = attnkit.attention(q, k, v, mask, backend="math")
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=1e-5)


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 3), lq=st.integers(1, 150), lk=st.integers(1, 150),
       d=st.sampled_from([32, 64]), dv=st.sampled_from([16, 32, 48]), pad=st.booleans(), seed=st.integers(0, 99))
def test_bfloat16_matches_math_in_bfloat16(bf16_kernel, b, h, lq, lk, d, dv, pad, seed):
    """Same rounding points as the math path in bfloat16 (float32 scores and softmax, weights rounded to
    bfloat16, float32 sums): the two differ by summation order and where 1/sum is applied, about one
    bfloat16 rounding of the output. Both are held to the float32 result of the same (rounded) inputs."""
    q, k, v = _inputs(b, h, lq, lk, d, dv, torch.bfloat16, seed)
    mask = _padding(lk, b, seed, pad)
    with torch.inference_mode():
        out = attnkit.attention(q, k, v, mask, backend="short")
        ref16, _ = math_attention(q, k, v, mask, None, d ** -0.5, 0.0, False)
        ref32 = attnkit.attention(q.float(), k.float(), v.float(), mask, backend="math")
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), ref16.float(), atol=2e-2, rtol=2e-2)
    err, err_math = (out.float() - ref32).abs().mean(), (ref16.float() - ref32).abs().mean()
    assert err <= 1.5 * err_math + 1e-4  # no less accurate than the reference path, on average


@settings(max_examples=30, deadline=None)
@given(lens=st.lists(st.integers(0, 70), min_size=1, max_size=6), h=st.integers(1, 3),
       dtype=st.sampled_from(["float32", "bfloat16"]), seed=st.integers(0, 99))
def test_segments_equal_each_sequence_on_its_own(native_kernel, lens, h, dtype, seed):
    """Packed end to end with a segments mask = every sequence attended separately (no leakage across)."""
    dtype = getattr(torch, dtype)
    if dtype not in short.kernel_dtypes():
        pytest.skip("no AVX512-BF16")
    total = sum(lens)
    qkv = rand(1, max(total, 1), 3, h, 32, dtype=torch.float32, seed=seed).detach()[:, :total].to(dtype)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (1, H, T, 32), views of packed QKV
    with torch.inference_mode():
        out = attnkit.attention(q, k, v, M.segments(lens), backend="short")
        ref = attnkit.attention(q, k, v, M.segments(lens), backend="math")
        starts = [sum(lens[:i]) for i in range(len(lens))]
        alone = [attnkit.attention(q[:, :, s:s + n], k[:, :, s:s + n], v[:, :, s:s + n], backend="math")
                 for s, n in zip(starts, lens)]
    tol = {"atol": 2e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    torch.testing.assert_close(out, ref, **tol)
    torch.testing.assert_close(out, torch.cat(alone, dim=2), **tol)
    assert out.transpose(1, 2).is_contiguous()


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 5), width=st.integers(1, 6), h=st.integers(1, 3), lq=st.integers(1, 5),
       lk=st.integers(1, 80), d=st.sampled_from([32, 64]), pad=st.booleans(),
       dtype=st.sampled_from(["float32", "bfloat16"]), seed=st.integers(0, 99))
def test_keys_read_through_a_row_table_are_those_rows(native_kernel, b, width, h, lq, lk, d, pad, dtype, seed):
    """``rows`` (a beam search's K/V cache, read in place): key and value j of row i are those of row rows[i, j] of
    k and v, a time-major buffer's strided view; the same output, bit for bit, as the kernel on those rows
    gathered."""
    dtype = getattr(torch, dtype)
    if dtype not in short.kernel_dtypes():
        pytest.skip("no AVX512-BF16")
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, lq, d, generator=g).to(dtype)
    buffers = torch.randn(2, lk + 2, width, h, d, generator=g).to(dtype)  # (K / V, capacity, B', H, d)
    k, v = (t[:lk].permute(1, 2, 0, 3) for t in buffers)  # (B', H, Lk, d) views
    rows = torch.randint(0, width, (b, lk + 3), generator=g)
    lengths = torch.randint(0, lk + 1, (b,), generator=g) if pad else None
    lens, none = native.lengths_arg(lengths), native.lengths_arg(None)
    picked = [t.transpose(1, 2)[rows[:, :lk], torch.arange(lk)].transpose(1, 2) for t in (k, v)]  # (B, H, Lk, d)
    with torch.inference_mode():
        out = native.kernel().short_forward(q, k, v, lens, none, d ** -0.5, rows)
        ref = native.kernel().short_forward(q, *picked, lens, none, d ** -0.5)
        want = attnkit.attention(q.float(), *(t.float() for t in picked), _padding_of(lengths), backend="math")
    assert torch.equal(out, ref)
    tol = {"atol": 2e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 3e-2, "rtol": 3e-2}
    torch.testing.assert_close(out.float(), want, **tol)


def _padding_of(lengths):
    return None if lengths is None else M.padding(lengths)


def test_no_segments_at_all(native_kernel):
    q = torch.randn(1, 2, 0, 32)
    with torch.inference_mode():
        for lens in ([], [0, 0]):
            assert attnkit.attention(q, q, q, M.segments(torch.tensor(lens, dtype=torch.long)),
                                     backend="short").shape == (1, 2, 0, 32)


def test_segments_chosen_automatically_up_to_the_longest_measured(native_kernel):
    q = torch.randn(1, 2, 300, 32)
    with torch.inference_mode():
        assert select_backend(q, q, q, M.segments([100, 150, 50]), None, False) == "short"
        longest = dispatch.SHORT_MAX_LEN + 1
        assert select_backend(q, q, q, M.segments([10, longest, 290 - longest]), None, False) != "short"


def test_bfloat16_exact_where_the_answer_is_exact(bf16_kernel):
    """Keys all equal: every weight is 1/n, so each output row is the mean of the value rows; with values
    that are small integers times 2^-4 the mean of 4 of them is exact in bfloat16."""
    k = torch.ones(1, 2, 4, 32).bfloat16()
    q = torch.randn(1, 2, 5, 32).bfloat16()
    v = (torch.randint(-8, 8, (1, 2, 4, 16)) / 16).bfloat16()
    with torch.inference_mode():
        out = attnkit.attention(q, k, v, backend="short")
    torch.testing.assert_close(out.float(), v.float().mean(-2, keepdim=True).expand(1, 2, 5, 16), atol=0, rtol=0)


def test_raises_instead_of_substituting(native_kernel):
    """Named explicitly, "short" runs its kernel or says why not: never the math path in its place."""
    q, k, v = (rand(2, 3, 20, 16, dtype=torch.float32, seed=s) for s in range(3))
    with pytest.raises(ValueError, match="backend 'short' has no backward"):
        attnkit.attention(q, k, v, backend="short")
    with torch.no_grad():
        with pytest.raises(ValueError, match="d a multiple of 16 and dv of 16, got d=8"):
            attnkit.attention(q[..., :8], k[..., :8], v, backend="short")
        with pytest.raises(ValueError, match="dv of 16, got d=16, dv=12"):
            attnkit.attention(q, k, v[..., :12], backend="short")
        with pytest.raises(ValueError, match="no dropout"):
            attnkit.attention(q, k, v, backend="short", dropout_p=0.1)
        with pytest.raises(ValueError, match="takes no `bias`"):
            attnkit.attention(q, k, v, bias=torch.zeros(20, 20), backend="short")
        with pytest.raises(ValueError, match="inputs here, got float64"):
            attnkit.attention(q.double(), k.double(), v.double(), backend="short")
        with pytest.raises(ValueError, match="tensors with data, got the meta device"):
            attnkit.attention(*(t.to("meta") for t in (q, k, v)), backend="short")


def test_packed_qkv_views_need_no_copy_and_heads_merge_free(native_kernel):
    check_packed_qkv_views("short")


@pytest.mark.parametrize("shape", [(9, 16), (2, 9, 16), (2, 2, 2, 9, 16)])
def test_other_ranks(native_kernel, shape):
    check_other_ranks("short", shape)


@needs_native
def test_rejects_other_masks_and_weights():
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(ValueError, match="backend 'short' takes no mask, a padding mask or a segments mask"):
        attnkit.attention(q, q, q, M.causal(), backend="short")
    with pytest.raises(ValueError, match="cannot return weights"):
        attnkit.attention(q, q, q, return_weights=True, backend="short")


def test_automatic_for_inference_up_to_the_measured_length(bf16_kernel):
    q = torch.randn(2, 12, 40, 32, dtype=torch.bfloat16)
    pad = M.padding(torch.tensor([40, 17]))
    with torch.inference_mode():
        assert select_backend(q, q, q, None, None, False) == "short"
        assert select_backend(q, q, q, pad, None, False) == "short"
        assert select_backend(q, q, q, M.causal(), None, False) != "short"
        assert select_backend(q.float(), q.float(), q.float(), pad, None, False) == "short"
        d8 = q[..., :8]
        assert select_backend(d8, d8, d8, None, None, False) != "short"  # d = 8: the kernel cannot
        long = torch.randn(1, 1, dispatch.SHORT_MAX_LEN + 1, 32, dtype=torch.bfloat16)
        assert select_backend(long, long, long, None, None, False) != "short"
    assert select_backend(q, q, q, None, None, False) != "short"  # autograd on


def test_step_kernel_is_the_backend_checked_once(native_kernel):
    """attention.step_kernel: the checks of attention(..., backend="short") on an example, then the raw kernel,
    which gives attention's output on later inputs of that kind; a backend that cannot take the example, or has
    no raw kernel, raises like attention would."""
    from attnkit.functional import native
    from attnkit.functional.attention import step_kernel

    q, k, v = _inputs(2, 3, 1, 20, 32, 32, torch.float32, 0)
    lengths = torch.tensor([20, 7])
    with torch.no_grad():
        fn = step_kernel("short", q, k, v, M.padding(lengths))
        out = fn(q, k, v, native.lengths_arg(lengths), native.lengths_arg(None), 32 ** -0.5)
        want = attnkit.attention(q, k, v, M.padding(lengths), backend="math")
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="backend 'math' has no step kernel"):
        step_kernel("math", q, k, v)
    with pytest.raises(ValueError, match="backend 'short' takes .*got float64"):
        step_kernel("short", q.double(), k.double(), v.double())
    with pytest.raises(ValueError, match="`k` must be a floating tensor"):
        step_kernel("short", q, k.long(), v)
