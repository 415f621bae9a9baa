"""Metrics: accuracy counting, a JSON-lines log, and the learning-curve PNG next to the checkpoint."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

IGNORE = -100  # targets with this value are not scored (padding, non-first subwords, unlabelled nodes)


def floor(x: float, digits: int = 4) -> str:
    """Format without ever rounding up (0.96999 -> '0.9699'): a printed score is never better than measured."""
    f = 10 ** digits
    return f"{math.floor(x * f + 1e-9) / f:.{digits}f}"


def count_correct(logits: Tensor, targets: Tensor) -> tuple[int, int]:
    """logits (N, C), targets (N,) -> (correct, counted), skipping ``IGNORE`` targets."""
    keep = targets != IGNORE
    pred = logits.argmax(-1)
    return int((pred[keep] == targets[keep]).sum()), int(keep.sum())


class MetricsLog:
    """Appends one JSON object per line to ``path`` (``metrics.jsonl``). Only rank 0 writes."""

    def __init__(self, path: str | os.PathLike, enabled: bool = True):
        self.path = Path(path)
        self.enabled = enabled

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")

    def truncate_after(self, step: int) -> None:
        """Drop records logged after ``step``, and test scores, which the end of a run writes (used on
        resume, so a record is never repeated and the log reads as an uninterrupted run's)."""
        if not self.enabled or not self.path.exists():
            return
        keep = [r for r in read_metrics(self.path) if r.get("step", 0) <= step and r.get("split") != "test"]
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in keep), encoding="utf-8")
        os.replace(tmp, self.path)


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """The records of a metrics log; lines that are not a JSON object (cut by a kill, damaged) are skipped."""
    out = []
    for line in Path(path).read_bytes().decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def plot_curves(metrics_path: str | os.PathLike, png_path: str | os.PathLike, title: str = "") -> Path | None:
    """Train loss and every evaluation metric against the step, written atomically as PNG."""
    try:
        from ..viz.figure import pyplot, save_figure
    except ImportError:  # pragma: no cover
        return None
    records = read_metrics(metrics_path) if Path(metrics_path).exists() else []
    train = [r for r in records if r.get("split") == "train"]
    evals = [r for r in records if r.get("split") not in (None, "train")]
    if not train and not evals:
        return None
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    if train:
        ax1.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss")
    wide = None  # a right-hand axis for metrics beyond 0-1 (a translation's BLEU, 0-100)
    for split in sorted({r["split"] for r in evals}):
        rs = [r for r in evals if r["split"] == split]
        if "loss" in rs[0]:
            ax1.plot([r["step"] for r in rs], [r["loss"] for r in rs], marker="o", label=f"{split} loss")
        keys = sorted({k for r in rs for k in r} - {"step", "epoch", "split", "loss", "time", "seconds", "count"})
        for key in keys:
            got = [r for r in rs if isinstance(r.get(key), (int, float))]  # a metric added later: from then on
            if not got:
                continue
            if max(abs(r[key]) for r in got) > 1.5:
                wide = wide or ax2.twinx()
                wide.plot([r["step"] for r in got], [r[key] for r in got], marker="s", linestyle="--",
                          color=f"C{3 + len(wide.lines)}", label=f"{split} {key} (right)")
                wide.set_ylabel(key)
            else:
                ax2.plot([r["step"] for r in got], [r[key] for r in got], marker="o", label=f"{split} {key}")
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss")
    ax1.legend()
    ax2.set_xlabel("step")
    ax2.set_ylabel("metric")
    lines = ax2.lines + (wide.lines if wide is not None else [])
    if lines:  # on the top axis, so that no curve is drawn over it
        (wide or ax2).legend(lines, [x.get_label() for x in lines], framealpha=0.9)
    fig.suptitle(title)
    out = save_figure(fig, png_path)
    plt.close(fig)
    return out
