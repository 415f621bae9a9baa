"""A speech recogniser's cross-attention on the sound's time axis: the log-mel spectrogram on top, below it
each decoder layer's cross-attention (the mean of its heads, then every head of the last layer): one row per
written token, columns = the encoder's steps drawn at their times, so a decoder that reads the digits in
order shows a staircase from top left to bottom right."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .figure import CMAP, DPI, MAX_HEIGHT_IN, pyplot, save_figure, ticks
from .labels import tell_apart
from .page import as_numpy

__all__ = ["speech_cross_attention_png"]


def speech_cross_attention_png(features, weights, tokens: Sequence[str], path: str | os.PathLike, *,
                               frames_per_step: int = 4, hop_seconds: float = 0.01, title: str = "") -> Path:
    """features (T, n_mels) log-mel frames; weights (layers, heads, t, S) cross-attention of the t written
    tokens (``tokens``) over S encoder steps of ``frames_per_step`` frames each."""
    plt = pyplot()
    f, w = as_numpy(features), as_numpy(weights)
    if f.ndim != 2 or w.ndim != 4 or 0 in w.shape or 0 in f.shape:
        raise ValueError(f"speech_cross_attention_png: `features` (T, n_mels) and `weights` (layers, heads, t, S) "
                         f"with no empty dim expected, got {f.shape} and {w.shape}")
    n_layers, n_heads, t, s = w.shape
    if len(tokens) != t:
        raise ValueError(f"speech_cross_attention_png: {len(tokens)} token labels for {t} rows of weights")
    seconds = f.shape[0] * hop_seconds
    step = frames_per_step * hop_seconds
    panels = [(w[n].mean(0), f"layer {n + 1}: mean of {n_heads} heads") for n in range(n_layers)]
    panels += [(w[-1, h], f"layer {n_layers}, head {h + 1}") for h in range(n_heads)]
    row_in = min(max(0.9, 0.22 * t + 0.5), (MAX_HEIGHT_IN - 1.6) / len(panels))  # the figure stays bounded
    width = min(15.0, max(6.0, 1.6 * seconds + 2.0))
    fig, axes = plt.subplots(1 + len(panels), 1, sharex=True, figsize=(width, 1.6 + row_in * len(panels)),
                             gridspec_kw={"height_ratios": [1.6] + [row_in] * len(panels)}, squeeze=False,
                             layout="constrained", dpi=DPI)
    axes = axes[:, 0]
    axes[0].imshow(f.T, origin="lower", aspect="auto", cmap="magma", interpolation="nearest",
                   extent=(0, seconds, 0, f.shape[1]))
    axes[0].set_ylabel("mel band", fontsize=8)
    axes[0].set_title("log-mel spectrogram", fontsize=9)
    im = None
    for ax, (m, name) in zip(axes[1:], panels):
        im = ax.imshow(m, aspect="auto", cmap=CMAP, vmin=0.0, vmax=1.0, interpolation="nearest",
                       extent=(0, s * step, t - 0.5, -0.5))
        ticks(ax, "y", tell_apart(tokens), t, row_in)  # "3@2", "3@3": a repeated digit; thinned out when many
        ax.set_ylabel("written", fontsize=8)
        ax.set_title(name, fontsize=9)
    axes[-1].set_xlabel(f"time (s); the encoder has one step per {step * 1000:.0f} ms", fontsize=8)
    fig.colorbar(im, ax=list(axes[1:]), shrink=0.9, aspect=40, label="cross-attention weight (0 to 1, linear)")
    fig.suptitle(title or "cross-attention of each written token over the sound", fontsize=10)
    out = save_figure(fig, path)
    plt.close(fig)
    return out
