"""grad_reverse: the identity forward, the gradient times -scale backward, and its bad input."""

import pytest
import torch

from attnkit.functional.gradient import grad_reverse


@pytest.mark.parametrize("scale", [0.0, 0.3, 1.0, 4.0])
def test_forward_is_the_identity_and_backward_reverses_and_scales(scale):
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 5, dtype=torch.float64)
    y = grad_reverse(x, scale)
    assert torch.equal(y, x)
    (y * w).sum().backward()
    assert torch.equal(x.grad, w * -scale)


def test_only_the_path_through_it_is_reversed():
    x = torch.tensor([2.0, -1.0], requires_grad=True)
    (x.square().sum() + 3 * grad_reverse(x, 0.5).sum()).backward()  # d/dx: 2x + 3 * (-0.5)
    assert torch.equal(x.grad, torch.tensor([4.0 - 1.5, -2.0 - 1.5]))


@pytest.mark.parametrize("scale", [-0.1, float("nan"), float("inf"), True, "1"])
def test_a_bad_scale_is_one_line_naming_it(scale):
    with pytest.raises(ValueError, match="grad_reverse: `scale` must be a finite number >= 0"):
        grad_reverse(torch.zeros(2), scale)
