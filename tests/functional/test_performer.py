"""FAVOR+ (approximate): positive features estimating the softmax kernel, error shrinking with more features."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional.performer import favor_attention, orthogonal_gaussian, positive_features


def _kernel_error(q, k, projection):
    """Mean relative error of phi(q) . phi(k) against exp(q . k / sqrt(d)) (no stabilisation: tiny inputs)."""
    c = q.shape[-1] ** -0.25
    fq = positive_features(q * c, projection, is_query=True)
    fk = positive_features(k * c, projection, is_query=False)
    est = fq @ fk.T
    exact = (q @ k.T * q.shape[-1] ** -0.5).exp()
    ratio = est / exact  # the stabilisers make it a constant per row (they cancel in attention): divide it out
    ratio = ratio / ratio.mean(-1, keepdim=True)
    return float((ratio - 1).abs().mean())


def test_features_positive_and_estimate_the_softmax_kernel_better_with_more_features():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(32, 16, generator=g, dtype=torch.float64) * 0.5, torch.randn(48, 16, generator=g,
                                                                                    dtype=torch.float64) * 0.5
    errs = []
    for m in (16, 256, 4096):
        runs = [_kernel_error(q, k, orthogonal_gaussian(m, 16, generator=torch.Generator().manual_seed(s),
                                                        dtype=torch.float64)) for s in range(4)]
        errs.append(sum(runs) / len(runs))
        assert (positive_features(q, orthogonal_gaussian(m, 16, dtype=torch.float64), is_query=True) > 0).all()
    assert errs[0] > 2 * errs[1] > 4 * errs[2]  # variance ~ 1/m: error ~ 1/sqrt(m)


def test_attention_error_shrinks_as_features_grow():
    q, k, v = (torch.randn(2, 3, 64, 16, generator=torch.Generator().manual_seed(s)) * 0.5 for s in range(3))
    ref = attnkit.attention(q, k, v, backend="math")
    errs = []
    for m in (16, 256, 4096):
        runs = [(favor_attention(q, k, v, orthogonal_gaussian(m, 16, generator=torch.Generator().manual_seed(s)))
                 - ref).abs().mean() for s in range(3)]
        errs.append(float(sum(runs) / len(runs)))
    assert errs[0] > 2 * errs[1] > 4 * errs[2]
    assert errs[2] < 0.01


def test_orthogonal_rows():
    p = orthogonal_gaussian(8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    gram = p @ p.T
    off = gram - torch.diag(torch.diagonal(gram))
    assert off.abs().max() < 1e-10  # within a block the rows are orthogonal
    assert orthogonal_gaussian(20, 8).shape == (20, 8)


@settings(max_examples=15, deadline=None)
@given(length=st.integers(1, 60), causal=st.booleans(), seed=st.integers(0, 50))
def test_masks_honoured(length, causal, seed):
    """Hidden keys (NaN / inf values there) never reach an output; a query with no key gives zeros; the causal
    result for query i equals the unmasked one on the prefix 0..i."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 2, length, 8, generator=g, dtype=torch.float64) for _ in range(3))
    p = orthogonal_gaussian(32, 8, generator=g, dtype=torch.float64)
    n = int(torch.randint(0, length + 1, (1,), generator=g))
    mask = M.padding([length, n]) & M.causal() if causal else M.padding([length, n])
    dirty_k, dirty_v = k.clone(), v.clone()
    dirty_k[1, :, n:], dirty_v[1, :, n:] = float("nan"), float("inf")
    out = favor_attention(q, dirty_k, dirty_v, p, mask)
    assert torch.isfinite(out).all()
    assert out[1, :, :].abs().max() == 0 if n == 0 else True
    if n:
        short = favor_attention(q[1:, :, :n], k[1:, :, :n], v[1:, :, :n], p, M.causal() if causal else None)
        torch.testing.assert_close(out[1:, :, :n], short, atol=1e-10, rtol=1e-8)
    if causal:
        i = length - 1 if length < 3 else length // 2
        pref = favor_attention(q[:1, :, i:i + 1], k[:1, :, :i + 1], v[:1, :, :i + 1], p)
        torch.testing.assert_close(out[:1, :, i:i + 1], pref, atol=1e-10, rtol=1e-8)


def test_gradients_finite_and_bfloat16():
    q, k, v = (torch.randn(2, 100, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = favor_attention(q, k, v, orthogonal_gaussian(16, 8), M.causal())
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_unsupported_masks_raise():
    q = torch.zeros(1, 10, 4)
    with pytest.raises(ValueError, match="causal\\(\\) and padding\\(\\) only"):
        favor_attention(q, q, q, orthogonal_gaussian(8, 4), M.window(1, 1))
    with pytest.raises(ValueError, match="projection"):
        favor_attention(q, q, q, torch.zeros(8, 5))
