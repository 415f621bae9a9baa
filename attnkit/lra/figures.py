"""LRA-lite's figures from the cells' result rows.

- ``speed_accuracy_figure``: LRA's Figure 3: training speed (steps/s relative to full attention,
  averaged over the tasks) against mean test accuracy (over tasks and seeds); bubble area = peak memory;
- ``curves_figure``: dev accuracy against training steps, one panel per task, one line per variant
  (mean over the seeds), so a reader sees whether training had flattened.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from ..nn.variants import VARIANTS
from .report import common_tasks, relative_speed, summarize, task_order

__all__ = ["speed_accuracy_figure", "curves_figure"]


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def speed_accuracy_figure(rows: list[dict], path: str | Path, title: str = "LRA-lite",
                          tasks: list[str] | None = None) -> Path:
    """x = steps/s relative to full attention (mean over ``tasks``, default: the tasks every variant has run), y =
    mean test accuracy over those tasks and the seeds, bubble area = mean peak memory of a training step."""
    from matplotlib.ticker import FuncFormatter

    from ..viz.figure import pyplot

    plt = pyplot()
    all_tasks, variants = task_order(rows)
    summary = summarize(rows)
    tasks = tasks or common_tasks(rows) or all_tasks
    speed = relative_speed(rows, tasks)
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    mems = [s["peak_mb"] or 0 for (t, _), s in summary.items() if t in tasks]
    scale = 2500 / max(max(mems, default=1), 1)
    for v in variants:
        cells = [summary[(t, v)] for t in tasks if (t, v) in summary and summary[(t, v)]["mean"] is not None]
        if v not in speed or len(cells) < len(tasks):
            continue
        acc = 100 * statistics.fmean(c["mean"] for c in cells)
        size = max(30.0, scale * statistics.fmean(c["peak_mb"] or 0 for c in cells))
        color = "tab:blue" if VARIANTS[v].exact else "tab:orange"
        ax.scatter(speed[v], acc, s=size, alpha=0.45, color=color, edgecolors="black", linewidths=0.6)
        ax.annotate(v, (speed[v], acc), textcoords="offset points", xytext=(0, math.sqrt(size) / 2 + 4),
                    ha="center", fontsize=9)
    ax.set_xscale("log")
    for axis in (ax.xaxis.set_major_formatter, ax.xaxis.set_minor_formatter):
        axis(FuncFormatter(lambda x, _: f"{x:g}x"))
    labels = [next(s["label"] for (t, _), s in summary.items() if t == task) for task in tasks]
    ax.set_xlabel("training speed, relative to full attention (steps/s ratio, mean over tasks)")
    seeds = sorted({s["n"] for (t, _), s in summary.items() if t in tasks})
    ax.set_ylabel(f"mean test accuracy % (tasks below; {'-'.join(map(str, seeds[::max(1, len(seeds) - 1)]))} "
                  f"seed{'s' if seeds[-1] > 1 else ''} per cell)")
    ax.set_title(f"{title}: speed vs accuracy; bubble area = peak memory of a step\n"
                 "blue = exact attention, orange = approximate", fontsize=10)
    fig.text(0.5, 0.01, "tasks: " + ", ".join(labels), ha="center", fontsize=8, wrap=True)
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.25, y=0.2)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def _mean_curve(curves: list[list[list[float]]]) -> tuple[list[float], list[float]]:
    """Curves [[step, acc], ...] of the seeds -> (steps, mean accuracy) over the steps every seed has."""
    common = sorted(set.intersection(*(set(s for s, _ in c) for c in curves))) if curves else []
    by = [dict((s, a) for s, a in c) for c in curves]
    return common, [statistics.fmean(b[s] for b in by) for s in common]


def curves_figure(rows: list[dict], path: str | Path, tasks: list[str], title: str = "LRA-lite") -> Path:
    """One panel per task of ``tasks``: dev accuracy % against training step (after any self-pretraining),
    one line per variant, the mean over the seeds."""
    from ..viz.figure import pyplot

    plt = pyplot()
    _, variants = task_order(rows)
    tasks = [t for t in tasks if any(r["task"] == t and r.get("dev_curve") for r in rows)]
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(5.2 * max(1, len(tasks)), 4.2), squeeze=False)
    colors = plt.get_cmap("tab10")
    for ax, t in zip(axes[0], tasks):
        label = next(r.get("label") or t for r in rows if r["task"] == t)
        for i, v in enumerate(variants):
            curves = [r["dev_curve"] for r in rows if r["task"] == t and r["variant"] == v and r.get("dev_curve")]
            steps, accs = _mean_curve(curves)
            if steps:
                ax.plot(steps, [100 * a for a in accs], marker="o", markersize=3, color=colors(i % 10),
                        linestyle="-" if VARIANTS[v].exact else "--", label=v)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("training step (labels)")
        ax.set_ylabel("dev accuracy % (mean over seeds)")
        ax.grid(True, alpha=0.3)
    if tasks:
        axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{title}: dev accuracy during training (solid = exact, dashed = approximate)", fontsize=10)
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)
