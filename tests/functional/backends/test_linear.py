"""linear_approx: the Katharopoulos et al. formula, labelled approximate, never automatic."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import dispatch, get_backend, select_backend
from attnkit.functional.backends.linear import elu_feature_map


def _reference(q, k, v, keep=None):
    """Quadratic form of the same formula: w_ij = phi(q_i).phi(k_j) (masked), normalised by row sums."""
    w = elu_feature_map(q) @ elu_feature_map(k).transpose(-1, -2)  # (..., Lq, Lk)
    if keep is not None:
        w = w * keep
    return (w @ v) / (w.sum(-1, keepdim=True) + 1e-6)


@settings(max_examples=20, deadline=None)
@given(lead=st.sampled_from([(), (2,), (2, 3)]), length=st.integers(1, 150), causal=st.booleans(),
       pad=st.booleans(), seed=st.integers(0, 99))
def test_matches_quadratic_formula(lead, length, causal, pad, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(*lead, length, 6, generator=g, dtype=torch.float64) for _ in range(3))
    keep = torch.ones(length, length, dtype=torch.float64)
    mask = None
    if causal:
        keep, mask = keep.tril(), M.causal()
    if pad and lead:
        lengths = torch.randint(0, length + 1, (lead[0],), generator=g)
        pm = M.padding(lengths)
        keep = keep * pm.materialize(length, length, len(lead) + 2)
        mask = pm if mask is None else mask & pm
    out = attnkit.attention(q, k, v, mask, backend="linear_approx")
    torch.testing.assert_close(out, _reference(q, k, v, keep), atol=1e-9, rtol=1e-7)


def test_labelled_approximate_and_never_automatic():
    b = get_backend("linear_approx")
    assert b.exact is False and "approx" in b.name
    assert "linear_approx" not in {rule.backend for rule in dispatch.RULES}
    assert attnkit.functional.capabilities()["linear_approx"].automatic is False
    q = torch.zeros(1, 2, 4096, 8)
    for mask in (None, M.causal(), M.window(8, 8)):
        assert select_backend(q, q, q, mask, None, False) != "linear_approx"


def test_is_an_approximation_of_softmax_attention():
    q, k, v = (torch.randn(1, 2, 64, 8) for _ in range(3))
    approx = attnkit.attention(q, k, v, backend="linear_approx")
    exact = attnkit.attention(q, k, v, backend="math")
    assert not torch.allclose(approx, exact, atol=1e-3)


def test_gradients_finite_bf16():
    q, k, v = (torch.randn(2, 100, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = attnkit.attention(q, k, v, M.causal(), backend="linear_approx")
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_unsupported_inputs_raise():
    q = torch.zeros(1, 10, 4)
    with pytest.raises(ValueError, match="Window"):
        attnkit.attention(q, q, q, M.window(1, 1), backend="linear_approx")
    with pytest.raises(ValueError, match="dropout"):
        attnkit.attention(q, q, q, backend="linear_approx", dropout_p=0.1)
    with pytest.raises(ValueError, match="Lq == Lk"):
        attnkit.attention(q, torch.zeros(1, 12, 4), torch.zeros(1, 12, 4), M.causal(), backend="linear_approx")
