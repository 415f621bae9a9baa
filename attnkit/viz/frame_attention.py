"""Attention over audio frames: the log-mel spectrogram on top, each layer's heads below, on one time axis."""

from __future__ import annotations

import os
from pathlib import Path

from .figure import CMAP, pyplot, save_figure
from .page import as_numpy


def frame_attention_maps(features, weights, path: str | os.PathLike, *, title: str = "",
                         frames_per_step: int = 1) -> Path:
    """features (T, n_mels) log-mel frames; weights (layers, heads, T', T') of the encoder, one step per
    ``frames_per_step`` frames (the front end's subsampling). One panel per (layer, head): rows = query
    steps, columns = key steps; truncated (window) attention shows as a band. One colour bar for all."""
    plt = pyplot()
    from matplotlib.colors import PowerNorm

    f, w = as_numpy(features), as_numpy(weights)
    if f.ndim != 2 or w.ndim != 4 or w.shape[2] != w.shape[3]:
        raise ValueError(f"frame_attention_maps: `features` (T, n_mels) and `weights` (layers, heads, T', T') "
                         f"expected, got {f.shape} and {w.shape}")
    n_layers, n_heads, steps, _ = w.shape
    size = min(2.6, 13.0 / n_heads)
    fig = plt.figure(figsize=(size * n_heads + 1.4, 1.8 + size * n_layers), layout="constrained")
    grid = fig.add_gridspec(n_layers + 1, n_heads, height_ratios=[0.6 * size] + [size] * n_layers)
    spec = fig.add_subplot(grid[0, :])
    fig.colorbar(spec.imshow(f.T, origin="lower", aspect="auto", cmap="magma", interpolation="nearest"), ax=spec,
                 label="log mel energy", pad=0.01, aspect=10)
    spec.set_ylabel("mel band")
    spec.set_xlabel(f"frame (10 ms); the encoder sees one step per {frames_per_step} frame(s)")
    spec.set_title("log-mel spectrogram", fontsize=9)
    norm = PowerNorm(0.5, vmin=0.0, vmax=max(1e-9, float(w.max())))
    axes, im = [], None
    for n in range(n_layers):
        for h in range(n_heads):
            ax = fig.add_subplot(grid[n + 1, h])
            im = ax.imshow(w[n, h], cmap=CMAP, norm=norm, aspect="equal", interpolation="nearest")
            ax.tick_params(labelsize=6, length=2)
            if n == 0:
                ax.set_title(f"head {h + 1}", fontsize=8)
            if h == 0:
                ax.set_ylabel(f"layer {n + 1}\nquery step", fontsize=8)
            if n == n_layers - 1:
                ax.set_xlabel("key step", fontsize=8)
            axes.append(ax)
    fig.suptitle(title or f"attention over {steps} steps", fontsize=10)
    cb = fig.colorbar(im, ax=axes, shrink=0.8, aspect=30)
    cb.set_label("attention weight (square-root colour scale)", fontsize=8)
    out = save_figure(fig, path)
    plt.close(fig)
    return out
