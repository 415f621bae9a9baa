"""Where the class token looks: its attention over the image's pixels / patches, per layer and head."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .heatmap import _pyplot, _save


def class_token_maps(image, weights, config, path: str | os.PathLike, title: str = "") -> Path:
    """image (C, H, W); weights (layers, heads, 1 + N, 1 + N) of one image; config: a VisionConfig.

    Draws the image, then one panel per (layer, head): row 0 of the weights (the class token's query)
    over the N patch keys, reshaped to the patch grid.
    """
    plt = _pyplot()
    img = np.asarray(image.detach().float().cpu()).mean(0)
    w = np.asarray(weights.detach().float().cpu())
    n_layers, n_heads = w.shape[:2]
    gh, gw = config.height // config.patch, config.width // config.patch
    fig, axes = plt.subplots(n_layers, n_heads + 1, figsize=(1.9 * (n_heads + 1), 1.9 * n_layers), squeeze=False)
    for li in range(n_layers):
        axes[li][0].imshow(img, cmap="gray_r" if img.mean() < 0.5 else "gray")
        axes[li][0].set_ylabel(f"layer {li + 1}", fontsize=8)
        for hi in range(n_heads):
            ax = axes[li][hi + 1]
            ax.imshow(w[li, hi, 0, 1:].reshape(gh, gw), cmap="viridis")
            if li == 0:
                ax.set_title(f"head {hi + 1}", fontsize=8)
        for ax in axes[li]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0][0].set_title("input", fontsize=8)
    fig.suptitle(title or "class token attention")
    out = _save(fig, path)
    plt.close(fig)
    return out
