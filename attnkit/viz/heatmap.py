"""Attention heatmaps: rows = queries, columns = keys, written atomically as PNG."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np


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
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    os.replace(tmp, path)
    return path


def attention_heatmap(weights, path: str | os.PathLike, *, queries: Sequence[str] | None = None,
                      keys: Sequence[str] | None = None, title: str = "", annotate: bool | None = None) -> Path:
    """One heatmap of weights (Lq, Lk). Labels name queries (rows) and keys (columns)."""
    plt = _pyplot()
    w = np.asarray(weights.detach().float().cpu() if hasattr(weights, "detach") else weights)
    if w.ndim != 2:
        raise ValueError(f"attention_heatmap: `weights` must be 2-D (Lq, Lk), got shape {w.shape}")
    lq, lk = w.shape
    size = max(3.0, 0.45 * max(lq, lk) + 1.5)
    fig, ax = plt.subplots(figsize=(size, size * lq / max(lk, 1) + 0.6))
    im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=max(1e-9, float(w.max())), aspect="auto")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_xticks(range(lk), labels=list(keys) if keys else range(1, lk + 1), rotation=90 if keys else 0)
    ax.set_yticks(range(lq), labels=list(queries) if queries else range(1, lq + 1))
    if annotate if annotate is not None else max(lq, lk) <= 12:
        for i in range(lq):
            for j in range(lk):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if w[i, j] < 0.6 * w.max() else "black")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046)
    out = _save(fig, path)
    plt.close(fig)
    return out


def attention_grid(weights, path: str | os.PathLike, *, tokens: Sequence[str] | None = None,
                   title: str = "") -> Path:
    """A grid of heatmaps, weights (layers, heads, L, L): one row per layer, one column per head."""
    plt = _pyplot()
    w = np.asarray(weights.detach().float().cpu() if hasattr(weights, "detach") else weights)
    if w.ndim != 4:
        raise ValueError(f"attention_grid: `weights` must be 4-D (layers, heads, L, L), got shape {w.shape}")
    n_layers, n_heads, lq, lk = w.shape
    cell = max(1.8, 0.22 * max(lq, lk))
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(cell * n_heads, cell * n_layers), squeeze=False)
    for li in range(n_layers):
        for hi in range(n_heads):
            ax = axes[li][hi]
            ax.imshow(w[li, hi], cmap="viridis", vmin=0.0, aspect="auto")
            ax.set_xticks(range(lk), labels=list(tokens) if tokens else [""] * lk, rotation=90, fontsize=6)
            ax.set_yticks(range(lq), labels=list(tokens) if tokens else [""] * lq, fontsize=6)
            if li == 0:
                ax.set_title(f"head {hi + 1}", fontsize=8)
            if hi == 0:
                ax.set_ylabel(f"layer {li + 1}", fontsize=8)
    fig.suptitle(title)
    out = _save(fig, path)
    plt.close(fig)
    return out
