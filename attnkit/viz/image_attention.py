"""Where the class token looks: its attention over the image's pixels / patches, per layer and head."""

from __future__ import annotations

import os
from pathlib import Path

from .figure import CMAP, pyplot, save_figure
from .page import as_numpy


def class_token_maps(image, weights, config, path: str | os.PathLike, title: str = "") -> Path:
    """image (C, H, W); weights (layers, heads, 1 + N, 1 + N) of one image; config: a VisionConfig.

    Draws the image, then one panel per (layer, head): row 0 of the weights (the class token's query)
    over the N patch keys, laid out as the patch grid. One colour bar (0 to the largest weight) for all panels;
    the weight the class token gives itself is left out, so a panel's cells sum to 1 minus that.
    """
    plt = pyplot()
    img = as_numpy(image).mean(0)
    w = as_numpy(weights)
    n_layers, n_heads = w.shape[:2]
    gh, gw = config.height // config.patch, config.width // config.patch
    if w.shape[2:] != (1 + gh * gw, 1 + gh * gw):
        raise ValueError(f"class_token_maps: `weights` must be (layers, heads, {1 + gh * gw}, {1 + gh * gw}) for a "
                         f"{gh} x {gw} patch grid, got {tuple(w.shape)}")
    maps = w[:, :, 0, 1:].reshape(n_layers, n_heads, gh, gw)  # the class token's row, over the patches
    vmax = max(1e-9, float(maps.max()))
    size = min(1.9, 14.0 / (n_heads + 1))
    fig, axes = plt.subplots(n_layers, n_heads + 1, figsize=(size * (n_heads + 1) + 1.2, size * n_layers + 1.0),
                             squeeze=False, layout="constrained")
    im = None
    for li in range(n_layers):
        axes[li][0].imshow(img, cmap="gray_r" if img.mean() < 0.5 else "gray")
        axes[li][0].set_ylabel(f"layer {li + 1}", fontsize=8)
        for hi in range(n_heads):
            ax = axes[li][hi + 1]
            im = ax.imshow(maps[li, hi], cmap=CMAP, vmin=0.0, vmax=vmax, interpolation="nearest")
            if li == 0:
                ax.set_title(f"head {hi + 1}", fontsize=8)
        for ax in axes[li]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0][0].set_title("input", fontsize=8)
    cell = "pixel" if config.patch == 1 else f"{config.patch} x {config.patch} patch"
    fig.suptitle((title + "\n" if title else "") + f"where the class token looks: one cell per {cell}, "
                 "coloured by the class token's attention weight on it", fontsize=9)
    cb = fig.colorbar(im, ax=axes, shrink=0.9, aspect=30)
    cb.set_label("class token -> patch attention weight", fontsize=8)
    out = save_figure(fig, path)
    plt.close(fig)
    return out
