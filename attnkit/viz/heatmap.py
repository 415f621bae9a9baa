"""Attention heatmaps as PNG: rows = queries, columns = keys (``queries_as="columns"``: the lecture's
layout, one column per query), a colour bar saying what the colour is, and figure sizes bounded whatever
the length (labels thin out, then go, past what can be read). One colour map (``CMAP``) for every
attention PNG and page; where heads are compared the scale is absolute, 0 to 1. Repeated words are told
apart by their position (``labels.tell_apart``). Written atomically (``figure.save_figure``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .figure import CMAP, MAX_HEIGHT_IN, MAX_WIDTH_IN, pyplot, save_figure, ticks
from .labels import tell_apart
from .page import as_numpy


def attention_heatmap(weights, path: str | os.PathLike, *, queries: Sequence[str] | None = None,
                      keys: Sequence[str] | None = None, title: str = "", annotate: bool | None = None,
                      queries_as: str = "rows", vmax: float | None = None) -> Path:
    """One heatmap of weights (Lq, Lk), numbers in the cells when it is small (``annotate``).

    ``queries_as``: "rows" (batch-first, as ``attnkit.attention`` returns them) or "columns" (the lecture's
    A', one column per query). ``vmax``: the top of the colour scale (default: the largest weight)."""
    plt = pyplot()
    w = as_numpy(weights)
    if w.ndim != 2 or 0 in w.shape:
        raise ValueError(f"attention_heatmap: `weights` must be 2-D (Lq, Lk) and not empty, got shape {w.shape}")
    if queries_as not in ("rows", "columns"):
        raise ValueError(f"attention_heatmap: `queries_as` must be 'rows' or 'columns', got {queries_as!r}")
    queries = None if queries is None else tell_apart(queries)
    keys = None if keys is None else tell_apart(keys)
    rows_are_queries = queries_as == "rows"
    if not rows_are_queries:
        w, queries, keys = w.T, keys, queries  # (Lk, Lq): rows keys, columns queries; labels follow their axis
    lr, lc = w.shape
    cell = min(0.45, 11.0 / max(lr, lc))  # inches per cell: small inputs roomy, long ones bounded
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, 2.2 + cell * lc), min(MAX_HEIGHT_IN, 1.6 + cell * lr)),
                           layout="constrained")
    top = max(1e-9, float(w.max())) if vmax is None else float(vmax)
    im = ax.imshow(w, cmap=CMAP, vmin=0.0, vmax=top, aspect="auto", interpolation="nearest")
    ax.set_xlabel("key (one column each)" if rows_are_queries else "query (one column each)")
    ax.set_ylabel("query (one row each)" if rows_are_queries else "key (one row each)")
    ticks(ax, "x", keys, lc, cell * lc)
    ticks(ax, "y", queries, lr, cell * lr)
    if annotate if annotate is not None else max(lr, lc) <= 12:
        for i in range(lr):
            for j in range(lc):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if w[i, j] > 0.55 * top else "#222")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046, label="attention weight (linear colour scale)")
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def attention_panels(panels: Sequence[tuple], path: str | os.PathLike, *, queries: Sequence[str],
                     keys: Sequence[str] | None = None, title: str = "", queries_as: str = "columns",
                     mask=None) -> Path:
    """Weights (Lq, Lk) side by side, one panel each (``panels``: (weights, panel title) pairs), on one absolute
    colour scale (0 to 1) with one colour bar and the numbers in the cells: the lecture's figure of A'.

    ``queries_as="columns"`` (default, the lecture's A'): a column per query q^i, a row per key k^j;
    "rows": batch-first. Ticks read q^1 (label), k^1 (label) so they match the printed matrices. ``mask`` (Lq, Lk)
    bool, True = may attend: the masked cells are hatched and read "masked"."""
    plt = pyplot()
    if queries_as not in ("rows", "columns"):
        raise ValueError(f"attention_panels: `queries_as` must be 'rows' or 'columns', got {queries_as!r}")
    mats = [as_numpy(w) for w, _ in panels]
    if not mats or any(m.ndim != 2 or m.shape != mats[0].shape or 0 in m.shape for m in mats):
        raise ValueError(f"attention_panels: every panel must be (Lq, Lk) of one shape, got {[m.shape for m in mats]}")
    lq, lk = mats[0].shape
    keys = queries if keys is None else keys
    if len(queries) != lq or len(keys) != lk:
        raise ValueError(f"attention_panels: {len(queries)} query and {len(keys)} key labels for panels of {(lq, lk)}")
    qn = [f"q^{i + 1} {t}" for i, t in enumerate(tell_apart(queries))]
    kn = [f"k^{j + 1} {t}" for j, t in enumerate(tell_apart(keys))]
    columns = queries_as == "columns"
    rows_l, cols_l = (kn, qn) if columns else (qn, kn)
    cell = min(0.5, 8.0 / max(lq, lk))
    nr, nc = (lk, lq) if columns else (lq, lk)
    fig, axes = plt.subplots(1, len(mats), figsize=(len(mats) * (1.2 + cell * nc) + 1.6, 1.9 + cell * nr),
                             squeeze=False, layout="constrained")
    im = None
    hidden = None if mask is None else ~np.asarray(as_numpy(mask), dtype=bool)
    hidden = None if hidden is None else (hidden.T if columns else hidden)
    for ax, m, (_, name) in zip(axes[0], mats, panels):
        m = m.T if columns else m
        im = ax.imshow(m, cmap=CMAP, vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
        ax.set_xticks(range(nc), labels=cols_l, rotation=0 if max(map(len, cols_l)) <= 7 else 90, fontsize=8)
        ax.set_yticks(range(nr), labels=rows_l, fontsize=8)
        ax.set_xlabel("query q^i: one column each" if columns else "key k^j: one column each", fontsize=8)
        ax.set_ylabel("key k^j: one row each" if columns else "query q^i: one row each", fontsize=8)
        ax.set_title(name, fontsize=9)
        if max(nr, nc) <= 12:
            for i in range(nr):
                for j in range(nc):
                    off = hidden is not None and hidden[i, j]
                    ax.text(j, i, "masked" if off else f"{m[i, j]:.2f}", ha="center", va="center",
                            fontsize=6 if off else 7, color="white" if m[i, j] > 0.55 else "#222")
        if hidden is not None:
            for i, j in zip(*np.nonzero(hidden)):
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#bbb",
                                           linewidth=0))
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.9, aspect=25,
                 label="attention weight \u03b1' (0 to 1)" + (": each column sums to 1" if columns else ""))
    if title:
        fig.suptitle(title, fontsize=10)
    out = save_figure(fig, path)
    plt.close(fig)
    return out
