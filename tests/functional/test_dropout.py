"""dropout16: rate, scaling, unbiasedness, gradient, reproducibility, and its bad input."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.functional.dropout import dropout16


@settings(max_examples=25, deadline=None)
@given(p=st.floats(0.01, 0.95), n=st.integers(1, 3000), seed=st.integers(0, 2**31 - 1))
def test_drops_at_rate_p_and_scales_the_rest(p, n, seed):
    torch.manual_seed(seed)
    x = torch.rand(n, 3) + 0.5  # no zeros of its own
    y = dropout16(x, p)
    t = round(p * 65536)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] * (65536 / (65536 - t)))  # survivors scaled by 1 / keep prob
    rate = 1.0 - kept.float().mean().item()
    sd = math.sqrt(p * (1 - p) / x.numel())
    assert abs(rate - t / 65536) < 6 * sd + 1e-9  # binomial, 6 standard deviations


def test_unbiased_and_rate_on_a_large_input():
    torch.manual_seed(0)
    x = torch.full((1000, 1000), 3.0)
    y = dropout16(x, 0.6)
    assert abs((y == 0).float().mean().item() - 0.6) < 0.002  # sd 0.0005
    assert abs(y.mean().item() - 3.0) < 0.01  # E[y] = x


def test_every_16_bit_field_is_used():
    """All four 16-bit fields of each 64-bit draw decide an element: none is stuck (e.g. a sign bit
    that is always 0 would make every fourth element drop at a different rate)."""
    torch.manual_seed(1)
    kept = (dropout16(torch.ones(400_000), 0.5) != 0).view(-1, 4).float().mean(0)  # per field position
    assert ((kept - 0.5).abs() < 0.01).all(), kept


def test_gradient_is_the_mask_times_the_scale():
    x = torch.randn(64, 32, requires_grad=True)
    torch.manual_seed(3)
    y = dropout16(x, 0.25)
    g = torch.randn_like(y)
    y.backward(g)
    mask = (y != 0).float()
    torch.testing.assert_close(x.grad, g * mask * (65536 / (65536 - 16384)))


def test_reproducible_under_manual_seed_and_identity_when_off():
    x = torch.randn(10, 10)
    torch.manual_seed(7)
    a = dropout16(x, 0.5)
    torch.manual_seed(7)
    torch.testing.assert_close(dropout16(x, 0.5), a)
    assert dropout16(x, 0.5, training=False) is x and dropout16(x, 0.0) is x
    assert (dropout16(x, 1.0) == 0).all()


@pytest.mark.parametrize("p", [-0.1, 1.5, "0.5", None])
def test_bad_p(p):
    with pytest.raises(ValueError, match="`p` must be a number in"):
        dropout16(torch.ones(3), p)
