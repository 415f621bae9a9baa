"""The figures of ``attnkit experiment``: the lecture's three claims, measured (means over seeds, error bars one
standard deviation). Each takes the summaries of ``attnkit.experiments.runner.summarize``
(``{"model", "x", "mean", "std", "n"}``) and writes one PNG sized for a page about 800 pixels wide.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .complexity import fit_exponent
from .figure import pyplot, save_figure

__all__ = ["data_size_figure", "rnn_figure", "positions_figure", "curves"]

MARKERS = ("o", "s", "^", "D", "v", "P")  # lines that lie on each other stay told apart by their markers
DODGE = 0.06  # sideways nudge between models, in octaves of the log x axis (the points' x is in the tables)
FONT = {"font.size": 10, "axes.titlesize": 10.5, "axes.labelsize": 10, "legend.fontsize": 8.5,
        "xtick.labelsize": 9, "ytick.labelsize": 9}


def _seeds(n: int) -> str:
    return (f"mean of {n} seeds, bars: one standard deviation" if n > 1 else "one seed") + "; models nudged sideways"


def curves(summary: Sequence[dict]) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """model -> (x, mean, std) sorted by x, points without a number left out."""
    out: dict[str, list] = {}
    for s in summary:
        if s["mean"] is not None:
            out.setdefault(s["model"], []).append((s["x"], s["mean"], s["std"]))
    return {m: tuple(np.array(v, dtype=float).T) for m, v in ((m, sorted(p)) for m, p in out.items())}


def _errorbars(ax, summary, names: dict[str, str], *, scale: float = 100.0, dodge: float = DODGE) -> None:
    """One line with error bars per model, in the order and colours of ``names`` (C0, C1, ...); on a log x axis,
    model i of k drawn at x * 2^(dodge * (i - (k - 1) / 2)), so lines lying on each other stay visible."""
    c = curves(summary)
    for i, model in enumerate(names):
        if model in c:
            x, mean, std = c[model]
            x = x * 2.0 ** (dodge * (i - (len(names) - 1) / 2))
            ax.errorbar(x, mean * scale, yerr=std * scale, marker=MARKERS[i % len(MARKERS)], ms=7 - i % 3,
                        mfc="none" if i % 2 else f"C{i}", capsize=3, lw=1.5, color=f"C{i}", label=names[model])


def _count(x: int) -> str:
    """A tick label short enough for neighbours on a log axis: 300, 1k, 55k."""
    return str(x) if x < 1000 else f"{x / 1000:g}k"


def _log2_axis(ax, xs: Sequence[int], label: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(xs), labels=[str(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel(label)


def data_size_figure(summary: Sequence[dict], path: str | os.PathLike, names: dict[str, str], *,
                     reference: str = "cnn", seeds: int = 3, note: str = "",
                     leads: Sequence[dict] | None = None) -> Path:
    """Left: test accuracy against training-set size (log x). Right: the reference model's lead over each
    other model in accuracy points (the gap the lecture predicts shrinks with more data): ``leads``, summaries
    of the per-seed differences, where given; else the difference of the means, bars their stds combined."""
    plt = pyplot()
    with plt.rc_context(FONT):
        fig, (a, b) = plt.subplots(1, 2, figsize=(9.2, 3.9), layout="constrained")
        _errorbars(a, summary, names)
        xs = sorted({s["x"] for s in summary})
        a.set_xscale("log")
        a.set_xticks(xs, labels=[_count(x) for x in xs])
        a.minorticks_off()
        a.set_xlabel("training images (log scale)")
        a.set_ylabel("test accuracy (%)")
        a.set_title("MNIST test accuracy")
        a.grid(True, color="#eee")
        a.legend(loc="lower right")
        c = curves(summary)
        if leads is not None:
            lc = curves(leads)
            for i, model in enumerate(names):
                if model in lc:
                    x, m, s = lc[model]
                    x = x * 2.0 ** (DODGE * (i - (len(names) - 1) / 2))
                    b.errorbar(x, m * 100, yerr=s * 100, marker=MARKERS[i % len(MARKERS)], ms=6 - i % 3,
                               mfc="none" if i % 2 else f"C{i}", capsize=3, lw=1.5, color=f"C{i}", label=names[model])
        elif reference in c:
            rx, rm, rs = c[reference]
            for i, model in enumerate(names):
                if model == reference or model not in c:
                    continue
                x, m, s = c[model]
                keep = np.isin(rx, x)
                gap = (rm[keep] - m[np.isin(x, rx)]) * 100
                err = np.hypot(rs[keep], s[np.isin(x, rx)]) * 100
                b.errorbar(rx[keep], gap, yerr=err, marker="o", ms=4, capsize=3, lw=1.5, color=f"C{i}",
                           label=names[model])
        b.axhline(0, color="#888", lw=1)
        b.set_xscale("log")
        b.set_xticks(xs, labels=[_count(x) for x in xs])
        b.minorticks_off()
        b.set_xlabel("training images (log scale)")
        b.set_ylabel(f"{names.get(reference, reference)} minus model (points)")
        b.set_title(f"the {names.get(reference, reference)}'s lead (above 0: it wins)")
        b.grid(True, color="#eee")
        b.legend(loc="upper right")
        fig.suptitle(_seeds(seeds) + note, fontsize=9)
        out = save_figure(fig, path)
        plt.close(fig)
    return out


def rnn_figure(summary: Sequence[dict], timing: Sequence[dict], path: str | os.PathLike, names: dict[str, str], *,
               chance: float, batch: int, seeds: int = 3, note: str = "") -> Path:
    """Left: recall accuracy against the sequence length (the distance to the marked token). Right: time of
    a training step against the length per model, at each thread count measured, with the fitted exponent."""
    plt = pyplot()
    with plt.rc_context(FONT):
        fig, (a, b) = plt.subplots(1, 2, figsize=(9.2, 4.6), layout="constrained")
        colors = {m: f"C{i}" for i, m in enumerate(names)}
        _errorbars(a, summary, names)
        xs = sorted({s["x"] for s in summary})
        _log2_axis(a, xs, "sequence length L (answer L - 1 tokens after the mark)")
        a.axhline(chance * 100, color="#888", ls=":", lw=1, label="chance")
        a.set_ylim(-3, 103)
        a.set_ylabel("test accuracy (%)")
        a.set_title("recall of the marked first token")
        a.grid(True, color="#eee")
        a.legend(loc="center right")  # the lines lie at the top and the bottom; chance at 1 / vocab
        threads = sorted({t["threads"] for t in timing})
        for model in names:
            for th in threads:
                pts = sorted((t["x"], t["step_ms"]) for t in timing if t["model"] == model and t["threads"] == th)
                if len(pts) < 3:
                    continue
                x, ms = np.array(pts).T
                exp = fit_exponent(x, ms)
                b.plot(x, ms, marker="o" if th == threads[-1] else "s", ms=4, lw=1.5, color=colors[model],
                       ls="-" if th == threads[-1] else "--",
                       label=f"{names[model]}, {th} thread{'s' if th > 1 else ''}: L^{exp:.2f}")
        if timing:
            _log2_axis(b, sorted({t["x"] for t in timing}), "sequence length L")
            b.set_yscale("log")
            b.legend(fontsize=7.5, title="exponent fitted on the longer half", title_fontsize=7.5, ncols=2,
                     loc="upper center", bbox_to_anchor=(0.5, -0.2))
        b.set_ylabel("time per training step (ms)")
        b.set_title(f"time of a training step, batch of {batch}")
        b.grid(True, which="major", color="#eee")
        fig.suptitle(_seeds(seeds) + note, fontsize=9)
        out = save_figure(fig, path)
        plt.close(fig)
    return out


def positions_figure(summary: Sequence[dict], path: str | os.PathLike, names: dict[str, str], *, train_length: int,
                     chance: float, seeds: int = 3, note: str = "") -> Path:
    """Token accuracy of the previous-token task against the test length, one line per encoding; the training
    lengths shaded."""
    plt = pyplot()
    with plt.rc_context(FONT):
        fig, ax = plt.subplots(figsize=(7.2, 4.0), layout="constrained")
        xs = sorted({s["x"] for s in summary})
        ax.axvspan(xs[0] / 1.3, train_length, color="#f1f1f1", label=f"trained on lengths <= {train_length}")
        _errorbars(ax, summary, names)
        ax.axhline(chance * 100, color="#888", ls=":", lw=1, label="chance")
        _log2_axis(ax, xs, "test sequence length (log scale)")
        ax.set_xlim(xs[0] / 1.3, xs[-1] * 1.3)
        ax.set_ylim(-3, 103)
        ax.set_ylabel("token accuracy (%)")
        ax.set_title("name the previous token: each encoding beyond its training length")
        ax.grid(True, color="#eee")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.suptitle(_seeds(seeds) + note, fontsize=9)
        out = save_figure(fig, path)
        plt.close(fig)
    return out
