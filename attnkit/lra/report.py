"""LRA-lite's table and figure from the cells' result rows.

- ``accuracy_table``: variants x tasks, test accuracy in %, and the average (LRA's Table 1);
- ``cells_table``: every cell with accuracy, training steps/s, peak memory of a step, training time;
- ``speed_accuracy_figure``: LRA's Figure 3: training speed (steps/s relative to full attention,
  averaged over the tasks) against average accuracy; bubble area = peak memory.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..nn.variants import VARIANTS
from .settings import TASKS

__all__ = ["read_results", "accuracy_table", "cells_table", "speed_accuracy_figure", "relative_speed", "baselines"]

# LRA's Table 1 (Tay et al. 2021), the anchors quoted in the issue: ListOps (length 2K), Image (CIFAR-10,
# ours is MNIST), Pathfinder-32. Their models and budgets are far larger; these are reference points.
PUBLISHED = {"full": {"listops": 36.37, "image": 42.44, "pathfinder": 71.40},
             "performer": {"listops": 18.01, "image": 42.77, "pathfinder": 77.05},
             "linformer": {"listops": 35.70, "image": 38.56, "pathfinder": 76.34},
             "local": {"listops": 15.82, "image": 41.46, "pathfinder": 66.63}}


def baselines(train: list, test: list) -> dict[str, float]:
    """Test accuracy of two rules that learn nothing about the sequence: ``majority`` predicts the training
    set's most frequent class; ``first_token`` the most frequent training class given the first token
    (on ListOps the top operator: the answer to [MAX ...] is most often 9, to [MIN ...] 0). A model at
    these figures has learned the label counts, not the task. Examples are (tokens (L,), label)."""
    if not train or not test:
        raise ValueError("lra: baselines need a non-empty train and test split")
    counts: dict[int, int] = {}
    by_first: dict[int, dict[int, int]] = {}
    for tokens, y in train:
        counts[y] = counts.get(y, 0) + 1
        first = by_first.setdefault(int(tokens[0]), {})
        first[y] = first.get(y, 0) + 1
    majority = max(counts, key=lambda c: (counts[c], -c))
    rule = {tok: max(c, key=lambda k: (c[k], -k)) for tok, c in by_first.items()}
    return {"majority": sum(y == majority for _, y in test) / len(test),
            "first_token": sum(rule.get(int(tokens[0]), majority) == y for tokens, y in test) / len(test)}


def read_results(path: str | Path) -> list[dict]:
    """The rows of ``results.jsonl`` (a later row for the same task and variant replaces an earlier one)."""
    rows: dict[tuple[str, str], dict] = {}
    path = Path(path)
    if path.exists():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{lineno}: not JSON: {e}") from None
                rows[(r["task"], r["variant"])] = r
    return list(rows.values())


def _order(rows: list[dict]) -> tuple[list[str], list[str]]:
    tasks = [t for t in TASKS if any(r["task"] == t for r in rows)]
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    return tasks, variants


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def accuracy_table(rows: list[dict], floors: dict[str, dict[str, float]] | None = None) -> str:
    """Markdown: variant, exact, one column per task (test accuracy %), average, and LRA's published figures;
    with ``floors`` (task -> ``baselines``), two more rows: the majority class and the first-token rule."""
    tasks, variants = _order(rows)
    cell = {(r["task"], r["variant"]): r for r in rows}
    head = "| variant | exact | " + " | ".join(tasks) + " | avg | LRA paper (same tasks) |"
    lines = [head, "|" + "---|" * (len(tasks) + 4)]
    for v in variants:
        accs = [cell[(t, v)]["test_accuracy"] if (t, v) in cell else None for t in tasks]
        have = [a for a in accs if a is not None]
        avg = sum(have) / len(have) if have and len(have) == len(accs) else None
        paper = PUBLISHED.get(v, {})
        pub = " / ".join(f"{paper[t]:.2f}" if t in paper else "-" for t in tasks)
        lines.append(f"| {v} | {'yes' if VARIANTS[v].exact else 'no'} | " + " | ".join(_pct(a) for a in accs)
                     + f" | {_pct(avg)} | {pub} |")
    for name, label in (("majority", "(rule) majority class"), ("first_token", "(rule) class given the first token")):
        if floors and all(t in floors for t in tasks):
            accs = [floors[t][name] for t in tasks]
            lines.append(f"| {label} | - | " + " | ".join(_pct(a) for a in accs)
                         + f" | {_pct(sum(accs) / len(accs))} | - |")
    return "\n".join(lines)


def relative_speed(rows: list[dict]) -> dict[str, float]:
    """Per variant: the mean over tasks of its steps/s divided by full attention's on the same task."""
    cell = {(r["task"], r["variant"]): r for r in rows}
    out = {}
    tasks, variants = _order(rows)
    for v in variants:
        ratios = [cell[(t, v)]["steps_per_s"] / cell[(t, "full")]["steps_per_s"] for t in tasks
                  if (t, v) in cell and (t, "full") in cell and cell[(t, v)]["steps_per_s"]
                  and cell[(t, "full")]["steps_per_s"]]
        if ratios:
            out[v] = sum(ratios) / len(ratios)
    return out


def cells_table(rows: list[dict]) -> str:
    """Markdown, one row per cell."""
    tasks, variants = _order(rows)
    cell = {(r["task"], r["variant"]): r for r in rows}
    lines = ["| task | variant | test acc % | steps/s | vs full | peak MB (one step) | train s |",
             "|---|---|---|---|---|---|---|"]
    for t in tasks:
        for v in variants:
            r = cell.get((t, v))
            if r is None:
                continue
            full = cell.get((t, "full"), {}).get("steps_per_s")
            ratio = f"{r['steps_per_s'] / full:.2f}x" if full and r["steps_per_s"] else "-"
            mem = "-" if r["peak_mb"] is None else f"{r['peak_mb']:.0f}"
            sps = "-" if r["steps_per_s"] is None else f"{r['steps_per_s']:.3f}"
            lines.append(f"| {t} | {v} | {_pct(r['test_accuracy'])} | {sps} | {ratio} | {mem} | "
                         f"{r['train_seconds']:.0f} |")
    return "\n".join(lines)


def speed_accuracy_figure(rows: list[dict], path: str | Path, title: str = "LRA-lite") -> Path:
    """LRA's Figure 3: x = steps/s relative to full attention (mean over tasks), y = mean test accuracy,
    bubble area = mean peak memory of a training step."""
    from ..viz.heatmap import _pyplot

    plt = _pyplot()
    tasks, variants = _order(rows)
    cell = {(r["task"], r["variant"]): r for r in rows}
    speed = relative_speed(rows)
    fig, ax = plt.subplots(figsize=(7, 5))
    mems = [cell[(t, v)]["peak_mb"] or 0 for t in tasks for v in variants if (t, v) in cell]
    scale = 2500 / max(max(mems, default=1), 1)
    for v in variants:
        accs = [cell[(t, v)]["test_accuracy"] for t in tasks if (t, v) in cell]
        if v not in speed or not accs:
            continue
        mem = [cell[(t, v)]["peak_mb"] or 0 for t in tasks if (t, v) in cell]
        acc = 100 * sum(accs) / len(accs)
        size = max(30.0, scale * sum(mem) / len(mem))
        color = "tab:blue" if VARIANTS[v].exact else "tab:orange"
        ax.scatter(speed[v], acc, s=size, alpha=0.45, color=color, edgecolors="black", linewidths=0.6)
        ax.annotate(v, (speed[v], acc), textcoords="offset points", xytext=(0, math.sqrt(size) / 2 + 4),
                    ha="center", fontsize=9)
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter

    for axis in (ax.xaxis.set_major_formatter, ax.xaxis.set_minor_formatter):
        axis(FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.set_xlabel("training speed, relative to full attention (steps/s ratio, mean over tasks)")
    ax.set_ylabel(f"mean test accuracy % ({', '.join(tasks)})")
    ax.set_title(f"{title}: speed vs accuracy; bubble area = peak memory of a step\n"
                 "blue = exact attention, orange = approximate")
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.25, y=0.2)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
