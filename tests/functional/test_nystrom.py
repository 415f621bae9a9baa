"""Nyströmformer (approximate): with m = L landmarks it is exact softmax attention (S pinv(S) S = S)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional.nystrom import newton_schulz_pinv, nystrom_attention


@settings(max_examples=15, deadline=None)
@given(lead=st.sampled_from([(), (2,), (2, 3)]), length=st.integers(1, 40), pad=st.booleans(),
       seed=st.integers(0, 50))
def test_landmarks_equal_length_recovers_full_attention(lead, length, pad, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(*lead, length, 8, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = None
    if pad and lead:
        mask = M.padding(torch.randint(1, length + 1, (lead[0],), generator=g))
    out = nystrom_attention(q, k, v, length, mask, pinv_iterations=None)
    ref = attnkit.attention(q, k, v, mask, backend="math")
    keep = torch.ones(*lead, length, 1, dtype=torch.bool) if mask is None else \
        mask.materialize(1, length, len(lead) + 2).transpose(-1, -2).expand(*lead, length, 1)
    torch.testing.assert_close(out * keep, ref * keep, atol=1e-8, rtol=1e-6)  # padded query rows are free


def test_newton_schulz_converges_to_the_pseudo_inverse():
    g = torch.Generator().manual_seed(0)
    a = torch.softmax(torch.randn(3, 12, 12, generator=g, dtype=torch.float64), -1)
    exact = torch.linalg.pinv(a)
    errs = [float((newton_schulz_pinv(a, n) - exact).abs().max()) for n in (2, 6, 12, 30)]
    assert errs[0] > errs[1] > errs[2] and errs[3] < 1e-8


def test_fewer_landmarks_approximate():
    q, k, v = (torch.randn(1, 2, 64, 8, generator=torch.Generator().manual_seed(s)) * 0.3 for s in range(3))
    ref = attnkit.attention(q, k, v, backend="math")
    err = lambda m: float((nystrom_attention(q, k, v, m, pinv_iterations=None) - ref).abs().mean())  # noqa: E731
    assert err(64) < 1e-5 < err(8)
    assert err(8) < 0.1  # smooth attention (small scores) is well approximated by 8 segment means


def test_hidden_positions_never_influence_and_empty_rows_are_zero():
    q, k, v = (torch.randn(2, 2, 30, 8, dtype=torch.float64) for _ in range(3))
    k2, v2 = k.clone(), v.clone()
    k2[1, :, 17:], v2[1, :, 17:] = float("nan"), float("inf")
    mask = M.padding([0, 17])
    out = nystrom_attention(q, k2, v2, 6, mask)
    assert torch.isfinite(out).all() and out[0].abs().max() == 0
    k3, v3 = k.clone(), v.clone()
    k3[1, :, 17:], v3[1, :, 17:] = torch.randn(2, 13, 8, dtype=torch.float64), 5.0
    torch.testing.assert_close(out[1, :, :17], nystrom_attention(q, k3, v3, 6, mask)[1, :, :17], atol=1e-10,
                               rtol=1e-8)


def test_refuses_masks_it_cannot_honour():
    q = torch.zeros(1, 10, 4)
    with pytest.raises(ValueError, match="padding\\(\\) masks only"):
        nystrom_attention(q, q, q, 4, M.causal())
    with pytest.raises(ValueError, match="num_landmarks"):
        nystrom_attention(q, q, q, 0)
