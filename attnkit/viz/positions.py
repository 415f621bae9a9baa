"""Pictures of positional encodings, as d2l and the lectures draw them (``attnkit positions``).

- ``sinusoidal.png``: the table P (positions x dimensions), P[i, 2j] = sin(i w_j), P[i, 2j+1] = cos(i w_j)
  with w_j = 1 / 10000^(2j/d), and a few of its columns as curves;
- ``distance.png``: P[i] . P[k] for every pair, and against the distance k - i: the dot product depends on
  the distance only (it is sum_j cos((k - i) w_j));
- ``rotation.png``: d2l's demonstration that one fixed 2 x 2 rotation by delta w_j maps (p_{i,2j}, p_{i,2j+1})
  to (p_{i+delta,2j}, p_{i+delta,2j+1}) for every position i;
- ``learned.png``: a trained model's learned position vectors (MiniLM's), cosine similarity of every pair
  and against the distance, beside the sinusoidal table's;
- ``positions.html``: one page with the pictures, the formulas and the checked numbers.
"""

from __future__ import annotations

import base64
import html
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..functional.positional import sinusoidal_table
from .figure import pyplot, save_figure
from .page import as_numpy, write_page

__all__ = ["rotation_check", "position_figures", "RotationCheck"]


class RotationCheck(NamedTuple):
    delta: int
    max_error: float  # max over positions i and pairs j of |R(delta w_j) p_i - p_{i+delta}|
    pairs: int
    positions: int


def rotation_matrix(delta: int, omega: float) -> np.ndarray:
    """d2l's 2 x 2 matrix [[cos, sin], [-sin, cos]] of angle delta * omega (it does not depend on i)."""
    c, s = np.cos(delta * omega), np.sin(delta * omega)
    return np.array([[c, s], [-s, c]])


def rotation_check(table: np.ndarray, delta: int, base: float = 10000.0) -> RotationCheck:
    """Apply each pair's fixed rotation to every position i and compare with position i + delta."""
    length, dim = table.shape
    worst = 0.0
    for j in range(dim // 2):
        omega = base ** (-2 * j / dim)
        pairs = table[:, 2 * j:2 * j + 2]  # (L, 2): (sin(i w), cos(i w))
        moved = pairs[: length - delta] @ rotation_matrix(delta, omega).T  # (L - delta, 2)
        worst = max(worst, float(np.abs(moved - pairs[delta:]).max()))
    return RotationCheck(delta, worst, dim // 2, length - delta)


def _cosine(x: np.ndarray) -> np.ndarray:
    n = x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)
    return n @ n.T


def _by_distance(m: np.ndarray, max_distance: int) -> np.ndarray:
    """Mean of m[i, i + k] over i, for k = 0..max_distance."""
    return np.array([np.diagonal(m, k).mean() for k in range(max_distance + 1)])


class Panel(NamedTuple):
    """One figure's two panels: a matrix as an image (left), curves (right)."""

    matrix: np.ndarray
    image: dict  # imshow arguments (cmap, vmin, vmax, aspect)
    axes: tuple[str, str, str, str]  # x label, y label, title, colour bar label
    curves: list[tuple[np.ndarray, np.ndarray, str]]  # (x, y, legend)
    curve_axes: tuple[str, str, str]  # x label, y label, title


def _matrix_and_curves(plt, panel: Panel, path: Path, width_ratios=(1, 1)) -> Path:
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.4), layout="constrained", width_ratios=list(width_ratios))
    im = a.imshow(panel.matrix, interpolation="nearest", **panel.image)
    a.set_xlabel(panel.axes[0])
    a.set_ylabel(panel.axes[1])
    a.set_title(panel.axes[2])
    fig.colorbar(im, ax=a, label=panel.axes[3])
    for x, y, label in panel.curves:
        b.plot(x, y, label=label, lw=1.5, alpha=0.85)
    b.set_xlabel(panel.curve_axes[0])
    b.set_ylabel(panel.curve_axes[1])
    b.set_title(panel.curve_axes[2])
    b.legend(fontsize=8)
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def _table_figure(plt, p: np.ndarray, path: Path) -> Path:
    length, dim = p.shape
    curves = [(np.arange(length), p[:, col], f"dim {col}") for col in (6, 7, 8, 9) if col < dim]  # d2l's columns
    return _matrix_and_curves(plt, Panel(
        p, {"cmap": "RdBu_r", "vmin": -1, "vmax": 1, "aspect": "auto"},
        ("encoding dimension (2j: sin, 2j+1: cos)", "position i",
         f"sinusoidal table P ({length} positions x {dim} dimensions)", "P[i, dim]"),
        curves, ("position i", "P[i, dim]", "columns 6-9: lower dimensions oscillate faster")), path, (1.4, 1))


def _distance_figure(plt, p: np.ndarray, path: Path) -> Path:
    dots, k = p @ p.T, np.arange(p.shape[0])  # (L, L)
    curves = [(k - i, dots[i], f"from position i = {i}") for i in (0, len(k) // 4, len(k) // 2)]
    return _matrix_and_curves(plt, Panel(
        dots, {"cmap": "Blues", "aspect": "equal"},
        ("position k", "position i", "P[i] . P[k] for every pair of positions", "dot product"),
        curves, ("distance k - i", "P[i] . P[k]", "the same curve from every i: it depends on the distance only")),
        path)


def _rotation_figure(plt, p: np.ndarray, delta: int, base: float, path: Path) -> Path:
    dim = p.shape[1]
    half = dim // 2  # slow enough pairs that the arrows turn by less than a half circle
    pairs = sorted({min(half - 1, max(1, half // f)) for f in (16, 8, 5)}) if half >= 4 else list(range(half))
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 4.4), layout="constrained", squeeze=False)
    shown = min(p.shape[0] - delta, 8)
    t = np.linspace(0, 2 * np.pi, 200)
    for ax, j in zip(axes[0], pairs):
        omega = base ** (-2 * j / dim)
        ax.plot(np.sin(t), np.cos(t), color="#ccc", lw=1)
        xy = p[:, 2 * j:2 * j + 2]
        ax.scatter(xy[:shown + delta, 0], xy[:shown + delta, 1], s=14, color="#2171b5", zorder=3)
        for i in range(shown):
            ax.annotate("", xy=xy[i + delta], xytext=xy[i],
                        arrowprops={"arrowstyle": "->", "color": "#d35400", "lw": 1.2, "shrinkA": 3, "shrinkB": 3})
            ax.text(*(xy[i] * 1.13), str(i), fontsize=7, ha="center", va="center")
        r = rotation_matrix(delta, omega)
        ax.set_title(f"pair j = {j}: (P[i, {2 * j}], P[i, {2 * j + 1}]), w_j = {omega:.4g}\n"
                     f"R = [[{r[0, 0]:.3f}, {r[0, 1]:.3f}], [{r[1, 0]:.3f}, {r[1, 1]:.3f}]] takes i to i + {delta}",
                     fontsize=8)
        ax.set_aspect("equal")
        ax.set_xlim(-1.3, 1.3)
        ax.set_ylim(-1.3, 1.3)
        ax.set_xlabel(f"sin(i w_{j})")
        ax.set_ylabel(f"cos(i w_{j})")
    fig.suptitle(f"one fixed rotation per pair maps every position i to i + {delta} (arrows, positions 0-{shown - 1})",
                 fontsize=10)
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def _learned_figure(plt, learned: np.ndarray, name: str, sinus: np.ndarray, path: Path) -> Path:
    cos_l, dist = _cosine(learned), min(len(learned) - 1, 100)
    k = np.arange(dist + 1)
    curves = [(k, _by_distance(cos_l, dist), f"{name} (learned)"),
              (k, _by_distance(_cosine(sinus), dist), f"sinusoidal, same size ({sinus.shape[1]} dims)")]
    return _matrix_and_curves(plt, Panel(
        cos_l, {"cmap": "RdBu_r", "vmin": -1, "vmax": 1, "aspect": "equal"},
        ("position k", "position i", f"{name}: cosine similarity of learned position vectors", "cosine similarity"),
        curves, ("distance k - i", "mean cosine similarity", "nearby positions get similar vectors, learned or not")),
        path)


def position_figures(out_dir: str | os.PathLike, *, length: int = 64, dim: int = 128, delta: int = 3,
                     learned=None, learned_name: str = "learned", base: float = 10000.0, figures: str = "both") -> dict:
    """Write the PNGs and positions.html into ``out_dir``; return {name: path} plus "rotation" (a RotationCheck)
    and, with ``learned`` (P, d) position vectors, "learned_by_distance" (mean cosine at distance 0..).
    ``figures``: "png" (no page), "html" (the page only: it holds the pictures, drawn in a temporary folder) or
    "both"."""
    if figures not in ("html", "png", "both"):
        raise ValueError(f"position_figures: `figures` must be html, png or both, got {figures!r}")
    if figures == "html":
        with tempfile.TemporaryDirectory() as tmp:
            res = position_figures(tmp, length=length, dim=dim, delta=delta, learned=learned,
                                   learned_name=learned_name, base=base, figures="png")
            res["page"] = _page(res, Path(out_dir) / "positions.html", length, dim, delta, learned_name)
        return {k: v for k, v in res.items() if k not in ("sinusoidal", "distance", "rotation_png", "learned")}
    for name, v in (("length", length), ("dim", dim), ("delta", delta)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"position_figures: `{name}` must be a positive integer, got {v!r}")
    if dim % 2:
        raise ValueError(f"position_figures: `dim` must be even, got {dim}")
    if delta >= length:
        raise ValueError(f"position_figures: `delta` ({delta}) must be below `length` ({length})")
    plt = pyplot()
    out = Path(out_dir)
    p = sinusoidal_table(length, dim, base, dtype=torch.float64).numpy()  # (L, d)
    res: dict = {"rotation": rotation_check(p, delta, base)}
    res["sinusoidal"] = _table_figure(plt, p, out / "sinusoidal.png")
    res["distance"] = _distance_figure(plt, p, out / "distance.png")
    res["rotation_png"] = _rotation_figure(plt, p, delta, base, out / "rotation.png")
    if learned is not None:
        lw = as_numpy(learned)
        if lw.ndim != 2:
            raise ValueError(f"position_figures: `learned` must be (positions, dims), got shape {lw.shape}")
        sinus = sinusoidal_table(lw.shape[0], lw.shape[1] - lw.shape[1] % 2, base, dtype=torch.float64).numpy()
        res["learned"] = _learned_figure(plt, lw, learned_name, sinus, out / "learned.png")
        res["learned_by_distance"] = _by_distance(_cosine(lw), min(len(lw) - 1, 100))
    if figures == "both":
        res["page"] = _page(res, out / "positions.html", length, dim, delta, learned_name)
    return res


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}" style="max-width:100%">'


def _page(res: dict, path: Path, length: int, dim: int, delta: int, learned_name: str) -> Path:
    rc: RotationCheck = res["rotation"]
    parts = [
        "<h2>Positional encodings</h2>",
        "<p class='note'>Self-attention has no order of its own: every position is treated alike. A positional "
        "encoding adds a vector p<sub>i</sub> to the input at position i. The sinusoidal table "
        "(Vaswani et al.; d2l) is P[i, 2j] = sin(i w<sub>j</sub>), P[i, 2j+1] = cos(i w<sub>j</sub>) with "
        f"w<sub>j</sub> = 1 / 10000<sup>2j/d</sup>; here {length} positions and d = {dim}.</p>",
        "<h3>1. The table</h3>", _img(res["sinusoidal"], "sinusoidal table"),
        "<h3>2. Dot products depend on the distance only</h3>",
        "<p class='note'>P[i] &middot; P[k] = &Sigma;<sub>j</sub> cos((k &minus; i) w<sub>j</sub>): the same "
        "value for every pair at the same distance, largest at distance 0.</p>",
        _img(res["distance"], "dot products against distance"),
        "<h3>3. Relative positions by one fixed rotation (d2l)</h3>",
        "<p class='note'>For any offset &delta;, the pair (p<sub>i,2j</sub>, p<sub>i,2j+1</sub>) times the matrix "
        "[[cos &delta;w<sub>j</sub>, sin &delta;w<sub>j</sub>], "
        "[&minus;sin &delta;w<sub>j</sub>, cos &delta;w<sub>j</sub>]] "
        "is (p<sub>i+&delta;,2j</sub>, p<sub>i+&delta;,2j+1</sub>); the matrix does not depend on i. "
        f"Checked here for &delta; = {rc.delta} on all {rc.positions} positions and {rc.pairs} pairs: largest "
        f"difference <span id='rotation-error' class='num'>{rc.max_error:.2e}</span>.</p>",
        _img(res["rotation_png"], "rotation"),
    ]
    if "learned" in res:
        near = res["learned_by_distance"]
        parts += ["<h3>4. Learned position vectors</h3>",
                  f"<p class='note'>{html.escape(learned_name)} learns one vector per position instead. Mean cosine "
                  f"similarity of two of its position vectors at distance 1: {near[1]:.2f}, 10: "
                  f"{near[min(10, len(near) - 1)]:.2f}, {len(near) - 1}: {near[-1]:.2f}.</p>",
                  _img(res["learned"], "learned position vectors")]
    return write_page(path, title="positional encodings", body="\n".join(parts), scripts=["static_page.js"], data={})
