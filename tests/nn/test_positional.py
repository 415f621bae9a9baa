import math

import pytest
import torch

from attnkit.functional.positional import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    relative_distances,
    rotary_cos_sin,
    sinusoidal_table,
)
from attnkit.nn import LearnedAbsolute, Sinusoidal


def test_sinusoidal_matches_d2l_formula():
    p = sinusoidal_table(50, 16)
    i, j = 37, 5
    assert math.isclose(p[i, 2 * j].item(), math.sin(i / 10000 ** (2 * j / 16)), abs_tol=1e-6)
    assert math.isclose(p[i, 2 * j + 1].item(), math.cos(i / 10000 ** (2 * j / 16)), abs_tol=1e-6)


@pytest.mark.parametrize("delta", [1, 3, 17])
def test_sinusoidal_shift_is_a_fixed_rotation_per_frequency(delta):
    d = 32
    p = sinusoidal_table(200, d).double()
    for j in range(d // 2):
        w = 1 / 10000 ** (2 * j / d)
        # row (sin a, cos a) @ rot = (sin(a + b), cos(a + b)) with b = delta * w
        rot = torch.tensor([[math.cos(delta * w), -math.sin(delta * w)],
                            [math.sin(delta * w), math.cos(delta * w)]], dtype=torch.float64)
        pair = p[:, 2 * j: 2 * j + 2]  # (L, 2): (sin, cos)
        # the same matrix maps position i to i + delta for every i
        torch.testing.assert_close(pair[:-delta] @ rot, pair[delta:], atol=1e-5, rtol=0)


def test_sinusoidal_module_offset_and_growth():
    m = Sinusoidal(8, max_len=4)
    x = torch.zeros(1, 3, 8)
    torch.testing.assert_close(m(x, offset=5)[0], sinusoidal_table(8, 8)[5:8])


def test_learned_absolute_errors_past_max_len():
    m = LearnedAbsolute(8, max_len=5)
    assert m(torch.zeros(2, 5, 8)).shape == (2, 5, 8)
    with pytest.raises(ValueError, match="max_len=5"):
        m(torch.zeros(2, 6, 8))


def test_rotary_scores_depend_on_distance_only():
    q, k = torch.randn(1, 8), torch.randn(1, 8)
    def score(i, j):
        ci, si = rotary_cos_sin(torch.tensor([i]), 8)
        cj, sj = rotary_cos_sin(torch.tensor([j]), 8)
        return (apply_rotary(q, ci, si) @ apply_rotary(k, cj, sj).T).item()
    assert math.isclose(score(3, 1), score(10, 8), rel_tol=1e-4)
    assert math.isclose(score(0, 0), (q @ k.T).item(), rel_tol=1e-5)


def test_alibi_slopes_and_bias():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    assert alibi_slopes(6).shape == (6,)
    b = alibi_bias(alibi_slopes(2), 3, 3)
    assert b.shape == (2, 3, 3) and b[0, 2, 0].item() == -2 * 2 ** -4


def test_relative_distances_are_clipped():
    r = relative_distances(4, 4, 2)
    assert r[0].tolist() == [2, 3, 4, 4] and r[3].tolist() == [0, 0, 1, 2]
