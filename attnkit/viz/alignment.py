"""Cross-attention as PNG: which source tokens each generated target token looked at (one layer per figure)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .figure import CMAP, MAX_HEIGHT_IN, MAX_WIDTH_IN, pyplot, save_figure, ticks
from .labels import tell_apart

__all__ = ["cross_attention_png"]


def cross_attention_png(weights, source: Sequence[str], target: Sequence[str], path: str | os.PathLike, *,
                        title: str = "") -> Path:
    """weights (heads, T, S) of one layer -> one panel per head and one of the heads' mean.

    Rows are the target tokens (the queries: the decoder), columns the source tokens (the keys and
    values: the encoder's output), each row sums to 1. One colour bar, 0 to 1 for every panel; repeated
    pieces are told apart by their position. The figure stays within ``MAX_WIDTH_IN`` x ``MAX_HEIGHT_IN`` whatever
    the lengths: past what can be read, labels thin out.
    """
    plt = pyplot()
    w = np.asarray(weights.detach().float().cpu() if hasattr(weights, "detach") else weights, dtype=np.float64)
    if w.ndim != 3 or 0 in w.shape:
        raise ValueError(f"cross_attention_png: `weights` must be (heads, T, S) with no empty dim, got {w.shape}")
    h, t, s = w.shape
    if len(target) != t or len(source) != s:
        raise ValueError(f"cross_attention_png: {len(target)} target and {len(source)} source labels for weights "
                         f"of shape {w.shape}")
    source, target = tell_apart(source), tell_apart(target)
    panels = [(w.mean(0), "mean of heads")] + [(w[i], f"head {i + 1}") for i in range(h)]
    cell = 0.32
    cols = min(len(panels), 3)
    rows = (len(panels) + cols - 1) // cols
    # inches per panel: roomy for short sentences, bounded by the page for long ones (labels then thin out)
    pw = min(max(2.5, cell * s + 1.2), (MAX_WIDTH_IN - 1.0) / cols)
    ph = min(max(2.0, cell * t + 1.0), (MAX_HEIGHT_IN - 0.4) / rows)
    fig, axes = plt.subplots(rows, cols, figsize=(pw * cols + 1.0, ph * rows + 0.4), squeeze=False,
                             layout="constrained")
    im = None
    for ax, (m, name) in zip(axes.flat, panels):
        im = ax.imshow(m, cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
        ticks(ax, "x", source, s, pw - 1.2)
        ticks(ax, "y", target, t, ph - 1.0)
        ax.set_xlabel("source token: key (one column each)", fontsize=8)
        ax.set_ylabel("target token: query (one row each)", fontsize=8)
        ax.set_title(name, fontsize=9)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.colorbar(im, ax=axes, shrink=0.9, aspect=30, label="cross-attention weight (0 to 1)")
    if title:
        fig.suptitle(title)
    out = save_figure(fig, path)
    plt.close(fig)
    return out
