"""The figure of ``attnkit experiment speakers``: each speaker's digit error rate when held out of training, with CTC
one pass and with beam + CTC (bars: the mean over seeds; whiskers: one standard deviation), the mean over the folds
as a dashed line per decoding, and the recordings held out (known voices) as white markers for comparison (a circle
for CTC one pass, a square for beam + CTC).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .figure import pyplot, save_figure

__all__ = ["speakers_figure"]

# (speaker-held-out metric, recordings-held-out metric, label, the recordings' marker)
DECODINGS = (("speaker_ctc", "recordings_ctc", "CTC one pass", "o"),
             ("speaker_joint", "recordings_joint", "beam 5 + CTC 0.5", "s"))


def speakers_figure(numbers: dict, path: str | os.PathLike, *, seeds: int = 1, note: str = "") -> Path:
    """``numbers``: ``attnkit.experiments.speakers.fold_table``'s (``{"folds": {speaker: {metric: {"mean", "std"}}},
    "mean": {metric: value}}``); one PNG about 800 pixels wide."""
    from .claims import FONT

    plt = pyplot()
    folds = numbers.get("folds", {})
    names = list(folds)
    x = np.arange(len(names))
    with plt.rc_context(FONT):
        fig, ax = plt.subplots(figsize=(7.6, 4.8), layout="constrained")
        width = 0.38
        for i, (held, known, label, marker) in enumerate(DECODINGS):
            at = x + (i - 0.5) * width
            mean = [100 * (folds[s][held]["mean"] or 0) for s in names]
            std = [100 * (folds[s][held]["std"] or 0) for s in names]
            ax.bar(at, mean, width, yerr=std if seeds > 1 else None, capsize=3, color=f"C{i}",
                   label=f"{label}: speaker held out")
            ax.plot(at, [100 * (folds[s][known]["mean"] or 0) for s in names], marker, ms=6, mfc="white",
                    mec="black", mew=1.2, label=f"{label}: recordings held out (known voices)")
            if numbers.get("mean", {}).get(held) is not None:
                ax.axhline(100 * numbers["mean"][held], color=f"C{i}", ls="--", lw=1,
                           label=f"{label}: mean over folds, {100 * numbers['mean'][held]:.2f}%")
        ax.set_xticks(x, labels=names)
        ax.set_xlabel("speaker held out of training")
        ax.set_ylabel("digit error rate (%)")
        ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", color="#eee")
        ax.set_axisbelow(True)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=7.5)
        # two texts, each cut on its own to the figure's width (save_figure): the seeds, then the command
        ax.set_title("a voice never heard: leave one speaker out"
                     + (f" (mean of {seeds} seeds, whiskers: ±1 sd)" if seeds > 1 else " (one seed)"), fontsize=10)
        if note:
            fig.suptitle(note, fontsize=9)
        out = save_figure(fig, path)
        plt.close(fig)
    return out
