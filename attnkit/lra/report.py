"""LRA-lite's tables from the cells' result rows (one row per task, variant and seed).

- ``summarize``: per (task, variant) the mean and the range (min - max) of test accuracy over the seeds;
- ``accuracy_table``: variants x tasks, mean (min-max) in %, with rows for the rules that learn nothing
  about the sequence (majority class, class given the first token) and for chance (LRA's Table 1);
- ``cells_table``: per (task, variant): accuracy, steps/s, the ratio to full attention, peak memory, time;
- ``depth_table``: ListOps accuracy per nesting depth beside the top-operator rule's;
- ``commands_table``: every cell with the one command that reproduces it.

The figures are in ``attnkit.lra.figures``.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ..nn.variants import VARIANTS
from ..train.metrics import IGNORE
from .settings import SUITES

__all__ = ["read_results", "summarize", "accuracy_table", "cells_table", "depth_table", "commands_table",
           "relative_speed", "baselines", "task_order", "common_tasks", "mean_floors", "PUBLISHED"]

# LRA's Table 1 (Tay et al. 2021), the anchors quoted in the issue: ListOps (length 2K), Image (CIFAR-10,
# ours is MNIST), Pathfinder-32. Their models and budgets are far larger; these are reference points.
PUBLISHED = {"full": {"listops": 36.37, "image": 42.44, "pathfinder": 71.40},
             "performer": {"listops": 18.01, "image": 42.77, "pathfinder": 77.05},
             "linformer": {"listops": 35.70, "image": 38.56, "pathfinder": 76.34},
             "local": {"listops": 15.82, "image": 41.46, "pathfinder": 66.63}}


def baselines(train: list, test: list, num_classes: int | None = None) -> dict[str, float | None]:
    """Test accuracy of rules that learn nothing about the sequence: ``majority`` predicts the training
    set's most frequent class; ``first_token`` the most frequent training class given the first token
    (on ListOps the top operator: the answer to [MAX ...] is most often 9, to [MIN ...] 0); ``chance``
    is 1 / ``num_classes``. A model at these figures has learned the label counts, not the task.
    Examples are (tokens (L,), label), or (tokens (L,), targets (L,)) scored where targets != -100
    (MQAR: no first-token rule, None)."""
    if not train or not test:
        raise ValueError("lra: baselines need a non-empty train and test split")
    chance = None if num_classes is None else 1.0 / num_classes
    if not isinstance(train[0][1], int):  # per-position targets
        def answers(split):
            return [y for _, t in split for y in t[t != IGNORE].tolist()]

        train_y, test_y = answers(train), answers(test)
        majority = max(set(train_y), key=lambda c: (train_y.count(c), -c))
        return {"majority": sum(y == majority for y in test_y) / len(test_y), "first_token": None, "chance": chance}
    counts: dict[int, int] = {}
    by_first: dict[int, dict[int, int]] = {}
    for tokens, y in train:
        counts[y] = counts.get(y, 0) + 1
        first = by_first.setdefault(int(tokens[0]), {})
        first[y] = first.get(y, 0) + 1
    majority = max(counts, key=lambda c: (counts[c], -c))
    rule = {tok: max(c, key=lambda k: (c[k], -k)) for tok, c in by_first.items()}
    return {"majority": sum(y == majority for _, y in test) / len(test),
            "first_token": sum(rule.get(int(tokens[0]), majority) == y for tokens, y in test) / len(test),
            "chance": chance}


def read_results(path: str | Path) -> list[dict]:
    """The rows of ``results.jsonl`` (a later row for the same task, variant and seed replaces an earlier one)."""
    rows: dict[tuple, dict] = {}
    path = Path(path)
    if path.exists():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    r = json.loads(line)
                    rows[(r["task"], r["variant"], r.get("seed", 0))] = r
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise ValueError(f"{path}:{lineno}: not a result row: {e}") from None
    return list(rows.values())


def task_order(rows: list[dict]) -> tuple[list[str], list[str]]:
    """The tasks (in the suites' order, then any other) and variants (registry order) present in ``rows``."""
    known = [t for suite in SUITES.values() for t in suite]
    present = {r["task"] for r in rows}
    tasks = [t for t in dict.fromkeys(known) if t in present] + sorted(present - set(known))
    return tasks, [v for v in VARIANTS if any(r["variant"] == v for r in rows)]


def common_tasks(rows: list[dict]) -> list[str]:
    """The tasks (in ``task_order``) on which every variant present in ``rows`` has at least one cell."""
    tasks, variants = task_order(rows)
    have = {(r["task"], r["variant"]) for r in rows}
    return [t for t in tasks if all((t, v) in have for v in variants)]


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def summarize(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """(task, variant) -> {"mean", "lo", "hi", "n" (seeds), "steps_per_s", "peak_mb", "train_seconds", "label"}:
    test accuracy's mean and range over the seeds, the rest means."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["task"], r["variant"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        accs = [r["test_accuracy"] for r in rs if r.get("test_accuracy") is not None]
        out[key] = {"mean": _mean(accs), "lo": min(accs, default=None), "hi": max(accs, default=None), "n": len(accs),
                    "steps_per_s": _mean(r.get("steps_per_s") for r in rs),
                    "peak_mb": _mean(r.get("peak_mb") for r in rs),
                    "train_seconds": _mean(r.get("train_seconds") for r in rs),
                    "label": rs[0].get("label") or key[0]}
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def _spread(s: dict | None) -> str:
    """``mean (lo-hi)`` in %, or the mean alone for one seed."""
    if s is None or s["mean"] is None:
        return "-"
    if s["n"] < 2:
        return _pct(s["mean"])
    return f"{100 * s['mean']:.1f} ({100 * s['lo']:.1f}-{100 * s['hi']:.1f})"


def mean_floors(floors: dict | None, task: str, name: str) -> float | None:
    """A rule's accuracy on ``task``, averaged over the seeds in ``floors`` ({task: {seed: baselines}})."""
    per_seed = (floors or {}).get(task, {})
    return _mean(b.get(name) for b in per_seed.values())


def accuracy_table(rows: list[dict], floors: dict | None = None) -> str:
    """Markdown: variant, exact, one column per task (test accuracy %, mean (min-max) over seeds), LRA's
    published figures; with ``floors`` ({task: {seed: ``baselines``}}) rows for the rules and chance."""
    tasks, variants = task_order(rows)
    summary = summarize(rows)
    labels = [next(s["label"] for (t, _), s in summary.items() if t == task) for task in tasks]
    lines = ["| variant | exact | " + " | ".join(labels) + " | LRA paper (ListOps / CIFAR-10 / Pathfinder-32) |",
             "|" + "---|" * (len(tasks) + 3)]
    for v in variants:
        paper = PUBLISHED.get(v, {})
        pub = " / ".join(f"{paper[t]:.2f}" for t in ("listops", "image", "pathfinder")) if paper else "-"
        lines.append(f"| {v} | {'yes' if VARIANTS[v].exact else 'no'} | "
                     + " | ".join(_spread(summary.get((t, v))) for t in tasks) + f" | {pub} |")
    names = (("majority", "(rule) majority class"), ("first_token", "(rule) class given the first token"),
             ("chance", "(chance) 1 / classes"))
    for name, label in names:
        accs = [mean_floors(floors, t, name) for t in tasks]
        if any(a is not None for a in accs):
            lines.append(f"| {label} | - | " + " | ".join(_pct(a) for a in accs) + " | - |")
    return "\n".join(lines)


def relative_speed(rows: list[dict], tasks: list[str] | None = None) -> dict[str, float]:
    """Per variant: the mean over ``tasks`` (default all) of its mean steps/s divided by full attention's."""
    summary = summarize(rows)
    all_tasks, variants = task_order(rows)
    out = {}
    for v in variants:
        ratios = [summary[(t, v)]["steps_per_s"] / summary[(t, "full")]["steps_per_s"] for t in (tasks or all_tasks)
                  if (t, v) in summary and (t, "full") in summary and summary[(t, v)]["steps_per_s"]
                  and summary[(t, "full")]["steps_per_s"]]
        if ratios:
            out[v] = statistics.fmean(ratios)
    return out


def cells_table(rows: list[dict]) -> str:
    """Markdown, one row per (task, variant): accuracy over the seeds and the means of the measurements."""
    tasks, variants = task_order(rows)
    summary = summarize(rows)
    lines = ["| task | variant | test acc % | seeds | steps/s | vs full | peak MB (one step) | train s |",
             "|---|---|---|---|---|---|---|---|"]
    for t in tasks:
        full = summary.get((t, "full"), {}).get("steps_per_s")
        for v in variants:
            s = summary.get((t, v))
            if s is None:
                continue
            ratio = f"{s['steps_per_s'] / full:.2f}x" if full and s["steps_per_s"] else "-"
            mem = "-" if s["peak_mb"] is None else f"{s['peak_mb']:.0f}"
            sps = "-" if s["steps_per_s"] is None else f"{s['steps_per_s']:.2f}"
            lines.append(f"| {s['label']} | {v} | {_spread(s)} | {s['n']} | {sps} | {ratio} | {mem} | "
                         f"{s['train_seconds']:.0f} |")
    return "\n".join(lines)


def _depth_cells(per_seed: list[dict], depths: list[str]) -> str:
    """Per depth: the mean over the seeds of each seed's accuracy ({depth: [correct, count]}), in %."""
    return " | ".join(_pct(_mean(b[d][0] / b[d][1] for b in per_seed if d in b and b[d][1])) for d in depths)


def depth_table(rows: list[dict], floors: dict | None = None) -> str:
    """Markdown per task with ``by_depth`` rows: accuracy % per nesting depth (mean over seeds of each seed's
    accuracy at that depth), and the top-operator rule's (``floors[task][seed]["by_depth"]``). Empty if none."""
    tasks, variants = task_order([r for r in rows if r.get("by_depth")])
    out = []
    for t in tasks:
        depths = sorted({d for r in rows if r["task"] == t for d in r.get("by_depth", {})}, key=int)
        label = next(r.get("label") or t for r in rows if r["task"] == t)
        out += [f"{label}: test accuracy % by nesting depth (examples at each depth in the first seed's test set)",
                "", "| variant | " + " | ".join(f"depth {d}" for d in depths) + " |", "|" + "---|" * (len(depths) + 1)]

        for v in variants:
            per_seed = [r["by_depth"] for r in rows if r["task"] == t and r["variant"] == v and r.get("by_depth")]
            if per_seed:
                out.append(f"| {v} | {_depth_cells(per_seed, depths)} |")
        rule = [b["by_depth"] for b in (floors or {}).get(t, {}).values() if b.get("by_depth")]
        if rule:
            out.append(f"| (rule) class given the top operator | {_depth_cells(rule, depths)} |")
        first = next((r["by_depth"] for r in rows if r["task"] == t and r.get("by_depth")), {})
        out.append("| (examples) | " + " | ".join(str(first.get(d, [0, 0])[1]) for d in depths) + " |")
        out.append("")
    return "\n".join(out)


def commands_table(rows: list[dict]) -> str:
    """Markdown, one row per cell: task, variant, seed, test accuracy, the command that reproduces it."""
    tasks, variants = task_order(rows)
    lines = ["| task | variant | seed | test acc % | command |", "|---|---|---|---|---|"]
    for t in tasks:
        for v in variants:
            for r in sorted((r for r in rows if r["task"] == t and r["variant"] == v), key=lambda r: r["seed"]):
                lines.append(f"| {t} | {v} | {r['seed']} | {_pct(r.get('test_accuracy'))} | `{r.get('command', '')}` |")
    return "\n".join(lines)
