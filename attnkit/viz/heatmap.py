"""Attention heatmaps as PNG: rows = queries, columns = keys, a colour bar saying what the colour is,
and figure sizes bounded whatever the length (labels thin out, then go, past what can be read).
Written atomically.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from .page import as_numpy

CMAP = "Blues"  # white = 0, dark blue = high: the same scale as the HTML pages
MAX_WIDTH_IN = 16.0  # inches at DPI: figures stay under about 1900 px wide
MAX_HEIGHT_IN = 14.0
DPI = 120
MIN_LABEL_PT = 4.5  # below this a tick label cannot be read: thin the labels out


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("attnkit.viz needs matplotlib: pip install 'attnkit[viz]'") from e
    return plt


def _save(fig, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=DPI, bbox_inches="tight")
    os.replace(tmp, path)
    return path


def _ticks(ax, axis: str, labels: Sequence[str] | None, n: int, room_in: float) -> None:
    """Label ``n`` ticks along ``axis`` in ``room_in`` inches: every label when they fit at a readable
    size, else every k-th; plain positions when there are no labels."""
    size = min(8.0, 72.0 * room_in / max(n, 1) * 0.9)
    step = 1 if size >= MIN_LABEL_PT else math.ceil(MIN_LABEL_PT / size)
    idx = list(range(0, n, step))
    names = [str(labels[i]) for i in idx] if labels is not None else [str(i + 1) for i in idx]
    font = max(size, MIN_LABEL_PT)
    if axis == "x":  # short labels stay upright
        ax.set_xticks(idx, labels=names, rotation=90 if max(map(len, names)) > 3 else 0, fontsize=font)
    else:
        ax.set_yticks(idx, labels=names, fontsize=font)


def attention_heatmap(weights, path: str | os.PathLike, *, queries: Sequence[str] | None = None,
                      keys: Sequence[str] | None = None, title: str = "", annotate: bool | None = None) -> Path:
    """One heatmap of weights (Lq, Lk), numbers in the cells when it is small (``annotate``)."""
    plt = _pyplot()
    w = as_numpy(weights)
    if w.ndim != 2 or 0 in w.shape:
        raise ValueError(f"attention_heatmap: `weights` must be 2-D (Lq, Lk) and not empty, got shape {w.shape}")
    lq, lk = w.shape
    cell = min(0.45, 11.0 / max(lq, lk))  # inches per cell: small inputs roomy, long ones bounded
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, 2.2 + cell * lk), min(MAX_HEIGHT_IN, 1.6 + cell * lq)),
                           layout="constrained")
    vmax = max(1e-9, float(w.max()))
    im = ax.imshow(w, cmap=CMAP, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    _ticks(ax, "x", keys, lk, cell * lk)
    _ticks(ax, "y", queries, lq, cell * lq)
    if annotate if annotate is not None else max(lq, lk) <= 12:
        for i in range(lq):
            for j in range(lk):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if w[i, j] > 0.55 * vmax else "#222")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046, label="attention weight")
    out = _save(fig, path)
    plt.close(fig)
    return out


def attention_grid(weights, path: str | os.PathLike, *, tokens: Sequence[str] | None = None,
                   keys: Sequence[str] | None = None, title: str = "", layer_names: Sequence[str] | None = None,
                   columns: int = 4) -> Path:
    """A grid of heatmaps for weights (layers, heads, Lq, Lk): one row per layer, one column per head.

    One layer (N = 1) wraps its heads into rows of ``columns``. Token labels go on the left column and
    the bottom row only; one colour bar (square-root scale, so small weights still show) for every panel.
    """
    plt = _pyplot()
    from matplotlib.colors import PowerNorm

    w = as_numpy(weights)
    if w.ndim != 4 or 0 in w.shape:
        raise ValueError(f"attention_grid: `weights` must be 4-D (layers, heads, Lq, Lk) and not empty, "
                         f"got shape {w.shape}")
    n_layers, n_heads, lq, lk = w.shape
    keys = tokens if keys is None else keys
    if n_layers == 1:
        ncols = min(n_heads, columns)
        nrows = math.ceil(n_heads / ncols)
        panels = [(0, h) for h in range(n_heads)]
    else:
        nrows, ncols = n_layers, n_heads
        panels = [(n, h) for n in range(n_layers) for h in range(n_heads)]
    labelled = tokens is not None
    margin = 1.4 if labelled else 0.6  # room for the token labels on the left and at the bottom
    panel = min(4.0, 1.0 + 0.3 * max(lq, lk),  # inches: grows with the tokens, bounded by the page
                (MAX_WIDTH_IN - margin - 1.0) / ncols, (MAX_HEIGHT_IN - margin - 0.8) / nrows)
    fig, axes = plt.subplots(nrows, ncols, figsize=(ncols * panel + margin + 1.0, nrows * panel + margin + 0.8),
                             squeeze=False, sharex=True, sharey=True, layout="constrained")
    norm = PowerNorm(0.5, vmin=0.0, vmax=max(1e-9, float(w.max())))
    im = None
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.set_visible(False)
            continue
        n, h = panels[k]
        im = ax.imshow(w[n, h], cmap=CMAP, norm=norm, aspect="auto", interpolation="nearest")
        row, col = divmod(k, ncols)
        if n_layers == 1 or row == 0:  # a grid of layers names the heads once, on top
            ax.set_title(f"head {h + 1}", fontsize=8)
        if n_layers > 1 and col == 0:
            ax.set_ylabel(layer_names[n] if layer_names else f"layer {n + 1}", fontsize=9)
        ax.tick_params(length=2)
        if col == 0:
            _ticks(ax, "y", tokens, lq, panel * 0.92) if labelled else ax.set_yticks([])
        if row == nrows - 1 or k + ncols >= len(panels):
            _ticks(ax, "x", keys, lk, panel * 0.92) if labelled else ax.set_xticks([])
            ax.xaxis.set_tick_params(labelbottom=True)
    fig.supxlabel("key", fontsize=9)
    fig.supylabel("query", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    cb = fig.colorbar(im, ax=axes, shrink=min(1.0, 4.0 / max(nrows, 1)) if nrows > 1 else 0.9, aspect=30)
    cb.set_label("attention weight (square-root colour scale)", fontsize=8)
    cb.set_ticks([t for t in (0, 0.05, 0.2, 0.5) if t < 0.9 * norm.vmax] + [round(norm.vmax, 2)])
    out = _save(fig, path)
    plt.close(fig)
    return out
