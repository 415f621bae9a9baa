"""Positional-encoding pictures: d2l's rotation holds to rounding, the page shows every picture."""

import numpy as np
import pytest
import torch

from attnkit.functional.positional import sinusoidal_table
from attnkit.viz.positions import position_figures, rotation_check, rotation_matrix


def test_fixed_rotation_maps_i_to_i_plus_delta():
    p = sinusoidal_table(50, 16, dtype=torch.float64).numpy()
    for delta in (1, 5, 17):
        rc = rotation_check(p, delta)
        assert rc.max_error < 1e-12 and rc.pairs == 8 and rc.positions == 50 - delta
    r = rotation_matrix(3, 0.25)
    assert np.allclose(r @ r.T, np.eye(2)) and np.isclose(np.linalg.det(r), 1.0)  # a rotation
    assert rotation_check(p[::-1].copy(), 2).max_error > 0.1  # reversed positions: no such rotation


def test_figures_and_page(tmp_path, open_page):
    learned = torch.randn(40, 12).cumsum(0)  # neighbours alike, as learned positions tend to be
    res = position_figures(tmp_path, length=32, dim=16, delta=2, learned=learned, learned_name="toy")
    for key in ("sinusoidal", "distance", "rotation_png", "learned"):
        assert res[key].read_bytes()[:4] == b"\x89PNG"
    near = res["learned_by_distance"]
    assert near[0] == pytest.approx(1.0) and near[1] > near[-1]
    page = open_page(res["page"])
    assert page.eval("[...document.images].every(i => i.complete && i.naturalWidth > 100)")
    assert page.eval("document.images.length") == 4
    assert float(page.eval("document.getElementById('rotation-error').textContent")) < 1e-12
    assert "toy learns one vector per position" in page.eval("document.body.textContent")


def test_bad_sizes(tmp_path):
    with pytest.raises(ValueError, match="`dim` must be even"):
        position_figures(tmp_path, dim=7)
    with pytest.raises(ValueError, match="`delta`"):
        position_figures(tmp_path, length=4, delta=4)
