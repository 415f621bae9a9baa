"""The figures of ``attnkit experiment``: curves in order, gaps and fitted exponents drawn, files written."""

import numpy as np

from attnkit.viz.claims import curves, data_size_figure, positions_figure, rnn_figure


def summary(models, xs, f):
    return [{"model": m, "x": x, "mean": f(i, x), "std": 0.01, "n": 3} for i, m in enumerate(models) for x in xs]


def test_curves_sort_by_x_and_skip_missing_points():
    s = [{"model": "a", "x": 10, "mean": 0.5, "std": 0.1}, {"model": "a", "x": 1, "mean": 0.2, "std": 0.0},
         {"model": "b", "x": 1, "mean": None, "std": None}]
    c = curves(s)
    assert list(c) == ["a"] and c["a"][0].tolist() == [1, 10] and c["a"][1].tolist() == [0.2, 0.5]


def test_the_three_figures(tmp_path):
    names = {"cnn": "CNN", "vit": "ViT", "window": "window"}
    s = summary(names, [300, 3000, 30000], lambda i, x: 0.9 - 0.1 * i / np.log10(x))
    assert data_size_figure(s, tmp_path / "a.png", names).stat().st_size > 30_000
    lead = summary(["vit", "window"], [300, 3000, 30000], lambda i, x: 0.1 / np.log10(x))
    assert data_size_figure(s, tmp_path / "a2.png", names, leads=lead).stat().st_size > 30_000
    rnn_names = {"gru": "GRU", "self-attention": "self-attention"}
    timing = [{"model": m, "x": x, "threads": t, "step_ms": x * (1 + i) / t} for i, m in enumerate(rnn_names)
              for x in (16, 64, 256) for t in (1, 2)]
    assert rnn_figure(summary(rnn_names, [16, 64, 256], lambda i, x: 1.0 if i else 16 / x), timing,
                      tmp_path / "b.png", rnn_names, chance=1 / 16, batch=32).stat().st_size > 30_000
    pos = {"rope": "RoPE", "learned": "learned"}
    assert positions_figure(summary(pos, [64, 128, 256], lambda i, x: 64 / x if i else 1.0), tmp_path / "c.png",
                            pos, train_length=64, chance=1 / 16).stat().st_size > 20_000


def test_rnn_figure_without_a_timing_sweep_draws_no_empty_legend(tmp_path, recwarn):
    names = {"gru": "GRU"}
    path = rnn_figure(summary(names, [16, 64], lambda i, x: 1.0), [], tmp_path / "d.png", names, chance=1 / 16,
                      batch=16, seeds=1)
    assert path.stat().st_size > 10_000
    assert not [w for w in recwarn if "No artists with labels" in str(w.message)]
