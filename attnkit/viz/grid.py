"""Grids of attention heatmaps as PNG: one row per layer, one column per head (one layer: its heads wrapped into
rows). ``AttentionGrid`` lays a figure out once and refills it for each set of weights of one shape (``attnkit
attend`` writes its layers' PNGs with one), which is most of the cost saved: matplotlib's layout and tick
placement run once, not once per file. ``attention_grid`` writes one.

Token labels go on the left column and the bottom row only (the inner panels have no ticks at all); one colour
bar for every panel, absolute (0 to 1, so heads compare), on a square-root scale so small weights still show, said
on the colour bar. Rows are queries, columns keys, said on the axes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from .figure import CMAP, MAX_HEIGHT_IN, MAX_WIDTH_IN, pyplot, save_figure, ticks
from .labels import tell_apart
from .page import as_numpy

__all__ = ["AttentionGrid", "attention_grid", "SCALE"]

SCALE = "attention weight (0 to 1, square-root colour scale)"


def _as_weights(weights):
    w = as_numpy(weights)
    if w.ndim != 4 or 0 in w.shape:
        raise ValueError(f"attention_grid: `weights` must be 4-D (layers, heads, Lq, Lk) and not empty, "
                         f"got shape {w.shape}")
    return w


class AttentionGrid:
    """A figure for weights of ``shape`` (layers, heads, Lq, Lk), laid out at the first ``write`` and refilled by
    the next ones; ``close()`` (or ``with``) frees it."""

    def __init__(self, shape: Sequence[int], *, tokens: Sequence[str] | None = None,
                 keys: Sequence[str] | None = None, layer_names: Sequence[str] | None = None, columns: int = 4):
        from matplotlib.colors import PowerNorm

        self.shape = tuple(shape)
        n_layers, n_heads, lq, lk = self.shape
        keys = tokens if keys is None else keys
        tokens = None if tokens is None else tell_apart(tokens)
        keys = None if keys is None else tell_apart(keys)
        if n_layers == 1:
            ncols = min(n_heads, columns)
            nrows = math.ceil(n_heads / ncols)
            self.panels = [(0, h) for h in range(n_heads)]
        else:
            nrows, ncols = n_layers, n_heads
            self.panels = [(n, h) for n in range(n_layers) for h in range(n_heads)]
        labelled = tokens is not None
        margin = 1.4 if labelled else 0.6  # room for the token labels on the left and at the bottom
        panel = min(4.0, 1.0 + 0.3 * max(lq, lk),  # inches: grows with the tokens, bounded by the page
                    (MAX_WIDTH_IN - margin - 1.0) / ncols, (MAX_HEIGHT_IN - margin - 0.8) / nrows)
        self.plt = pyplot()
        self.fig, axes = self.plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                                           figsize=(ncols * panel + margin + 1.0, nrows * panel + margin + 0.8))
        norm = PowerNorm(0.5, vmin=0.0, vmax=1.0)  # absolute: every panel, every figure
        self.images = []
        for k, ax in enumerate(axes.flat):
            if k >= len(self.panels):
                ax.set_visible(False)
                continue
            n, h = self.panels[k]
            self.images.append(ax.imshow(as_numpy(self._zeros(lq, lk)), cmap=CMAP, norm=norm, aspect="auto",
                                         interpolation="nearest"))
            row, col = divmod(k, ncols)
            if n_layers == 1 or row == 0:  # a grid of layers names the heads once, on top
                ax.set_title(f"head {h + 1}", fontsize=8)
            if n_layers > 1 and col == 0:
                ax.set_ylabel(layer_names[n] if layer_names else f"layer {n + 1}", fontsize=9)
            ax.tick_params(length=2)
            ticks(ax, "y", tokens, lq, panel * 0.92) if labelled and col == 0 else ax.set_yticks([])
            bottom = row == nrows - 1 or k + ncols >= len(self.panels)
            ticks(ax, "x", keys, lk, panel * 0.92) if labelled and bottom else ax.set_xticks([])
        self.fig.supxlabel("key (one column each)", fontsize=9)
        self.fig.supylabel("query (one row each)", fontsize=9)
        cb = self.fig.colorbar(self.images[-1], ax=axes, aspect=30,
                               shrink=min(1.0, 4.0 / max(nrows, 1)) if nrows > 1 else 0.9)
        cb.set_label(SCALE, fontsize=8)
        cb.set_ticks([0, 0.05, 0.2, 0.5, 1])
        self.laid_out = False

    @staticmethod
    def _zeros(lq: int, lk: int):
        import numpy as np

        return np.zeros((lq, lk), dtype=np.float32)

    def write(self, weights, path: str | os.PathLike, title: str = "") -> Path:
        """``weights`` (of this grid's shape) as a PNG at ``path``, titled ``title``."""
        w = _as_weights(weights)
        if w.shape != self.shape:
            raise ValueError(f"AttentionGrid.write: weights of shape {w.shape} for a grid of {self.shape}")
        for im, (n, h) in zip(self.images, self.panels):
            im.set_data(w[n, h])
        if self.fig._suptitle is not None:  # its text only: the place the layout gave it stays
            self.fig._suptitle.set_text(title)
        elif title:
            self.fig.suptitle(title, fontsize=10)
        out = save_figure(self.fig, path)
        if not self.laid_out:  # the layout found at the first save holds for the next: keep it
            self.fig.set_layout_engine("none")
            self.laid_out = True
        return out

    def close(self) -> None:
        self.plt.close(self.fig)

    def __enter__(self) -> AttentionGrid:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def attention_grid(weights, path: str | os.PathLike, *, tokens: Sequence[str] | None = None,
                   keys: Sequence[str] | None = None, title: str = "", layer_names: Sequence[str] | None = None,
                   columns: int = 4) -> Path:
    """A grid of heatmaps for weights (layers, heads, Lq, Lk) as a PNG (``AttentionGrid``, written once)."""
    w = _as_weights(weights)
    with AttentionGrid(w.shape, tokens=tokens, keys=keys, layer_names=layer_names, columns=columns) as grid:
        return grid.write(w, path, title)
