"""Graph attention as PNG: how one node (the query) weighs its neighbours (the keys: the nodes with an edge
into it, itself included), every head of every layer, on the 0-1 scale of every attention picture."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .figure import CMAP, pyplot, save_figure
from .labels import tell_apart
from .page import as_numpy

__all__ = ["node_attention_png"]


def node_attention_png(neighbours: Sequence[str], layers: Sequence[tuple], path: str | os.PathLike, *,
                       title: str = "") -> Path:
    """``layers``: (name, weights (H, K)) per layer, weights over the K ``neighbours`` (each row sums to 1).

    One panel per layer: a row per head, a column per neighbour, numbers in the cells when they fit."""
    plt = pyplot()
    mats = [as_numpy(w) for _, w in layers]
    k = len(neighbours)
    if not mats or any(m.ndim != 2 or m.shape[1] != k or 0 in m.shape for m in mats):
        raise ValueError(f"node_attention_png: every layer's weights must be (heads, {k}) for {k} neighbours, got "
                         f"{[m.shape for m in mats]}")
    names = tell_apart(neighbours)
    cell = min(0.5, 12.0 / k)
    heights = [m.shape[0] for m in mats]
    fig, axes = plt.subplots(len(mats), 1, figsize=(2.6 + cell * k, 2.6 + sum(0.4 + 0.28 * h for h in heights)),
                             squeeze=False, sharex=True, layout="constrained", gridspec_kw={"height_ratios": heights})
    im = None
    for ax, m, (name, _) in zip(axes[:, 0], mats, layers):
        im = ax.imshow(m, cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
        ax.set_yticks(range(m.shape[0]), labels=[f"head {h + 1}" for h in range(m.shape[0])], fontsize=7)
        ax.set_xticks(range(k), labels=names, rotation=90, fontsize=7)  # shown under the last panel only
        ax.set_ylabel("head (one row each)", fontsize=8)
        ax.set_title(name, fontsize=9)
        if k <= 16:
            for i in range(m.shape[0]):
                for j in range(k):
                    ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=6,
                            color="white" if m[i, j] > 0.55 else "#222")
    axes[-1, 0].set_xlabel("neighbour: a key (one column each); each row sums to 1", fontsize=8)
    fig.colorbar(im, ax=axes[:, 0].tolist(), shrink=0.9, aspect=20, label="attention weight (0 to 1)")
    if title:
        fig.suptitle(title, fontsize=10)
    out = save_figure(fig, path)
    plt.close(fig)
    return out
