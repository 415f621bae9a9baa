"""The cost of attention: exact peak-memory counting, exponent fits, and curves that bend as the
lecture's table says (tiny sizes; the real measurement is ``attnkit complexity``)."""

import numpy as np
import pytest
import torch

from attnkit.viz.complexity import LECTURE_TABLE, PeakMemory, complexity_report, fit_exponent


def test_peak_memory_counts_live_tensors_only():
    x = torch.ones(1000)  # made before: not counted
    with PeakMemory() as pm:
        a = x + 1  # 4000 bytes
        b = torch.empty(2000)  # 8000 bytes, both alive: 12000
        del a, b
        c = torch.empty(500)  # 2000 bytes after the others are gone
    assert pm.peak == 12000
    with PeakMemory() as pm:
        v = x.view(10, 100)  # a view allocates nothing
        s = x.sum()
    assert pm.peak == s.untyped_storage().nbytes() and v.shape == (10, 100) and c.numel() == 500


def test_fit_exponent():
    n = np.array([100, 200, 400, 800, 1600])
    assert fit_exponent(n, 3e-6 * n**2 + 1e-3) == pytest.approx(2.0, abs=0.05)  # the tail is quadratic
    assert fit_exponent(n, 5 * n) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="positive"):
        fit_exponent(n, np.zeros(5))


def test_curves_bend_as_the_lecture_says(tmp_path, one_thread):
    times = []
    for attempt in range(3):  # time is noisy on a shared machine: a busy moment gets two more tries
        res = complexity_report(tmp_path / str(attempt), (256, 512, 1024, 2048), d=16, heads=2, window=4, repeats=3)
        got = {r["row"].layer: r for r in res["rows"]}
        assert list(got) == [row.layer for row in LECTURE_TABLE]
        full = got.pop("self-attention")
        # memory is counted exactly: the n x n matrix makes self-attention's exponent near 2, the rest near 1
        assert full["mem_exp"] > 1.7
        assert all(0.9 < r["mem_exp"] < 1.15 for r in got.values()), {k: r["mem_exp"] for k, r in got.items()}
        # and self-attention's time grows fastest
        times.append({k: round(r["time_exp"], 2) for k, r in [("self-attention", full), *got.items()]})
        if full["time_exp"] > max(r["time_exp"] for r in got.values()) and full["time_exp"] > 1.6:
            break
    else:
        raise AssertionError(f"self-attention's time did not grow fastest in 3 tries: {times}")
    assert res["figure"].read_bytes()[:4] == b"\x89PNG"
    table = res["markdown"].read_text()
    assert "| self-attention | O(n^2 d) | O(1) | O(1) | 2 |" in table
    assert "| GRU | O(n d^2) | O(n) | O(n) | 1 |" in table
