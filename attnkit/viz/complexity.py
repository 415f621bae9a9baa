"""The cost of attention against the layers it replaces, measured here, beside the lecture's table.

Five layers of the same width d on one sequence of n vectors: a convolution (kernel k), a GRU, full
self-attention (the n x n weights materialised: the ``math`` backend), window attention (``local``,
w keys each side) and linear attention (``linear_approx``, elu + 1 features). For each n: the median
time of a forward pass (the repeats interleaved over every layer and length) and the peak memory of
the tensors it allocates (``PeakMemory``: every allocation seen by the dispatcher, freed when its
storage dies). A least-squares line through
log(cost) against log(n) on the longer half of the sizes gives the exponent the lecture predicts:
about 2 for full self-attention, about 1 for the others.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .. import masks
from ..nn import MultiHeadAttention
from .figure import pyplot, save_figure

__all__ = ["LECTURE_TABLE", "PeakMemory", "Measurement", "build_layers", "peak_memory", "seconds", "fit_exponent",
           "complexity_report"]


class Row(NamedTuple):
    layer: str
    per_layer: str  # computation
    sequential: str  # sequential operations
    path: str  # maximum path length between two positions
    exponent: int  # the power of n in the computation


# The lecture's table (d2l, "CNN vs RNN vs self-attention"), plus the two cheaper attentions.
LECTURE_TABLE = (
    Row("convolution", "O(k n d^2)", "O(1)", "O(n/k)", 1),
    Row("GRU", "O(n d^2)", "O(n)", "O(n)", 1),
    Row("self-attention", "O(n^2 d)", "O(1)", "O(1)", 2),
    Row("window attention", "O(n w d)", "O(1)", "O(n/w)", 1),
    Row("linear attention", "O(n d^2)", "O(1)", "O(1)", 1),
)


class PeakMemory(TorchDispatchMode):
    """Inside ``with PeakMemory() as m``: ``m.peak`` = the most bytes of tensors allocated in the block
    alive at once (tensors made before the block, such as weights and inputs, are not counted)."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}  # storages made in the block, still alive
        self.before: dict[int, StorageWeakRef] = {}  # storages met as inputs that were made before it
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor):
                ref = StorageWeakRef(t.untyped_storage())
                if ref.cdata not in self.live:
                    self.before[ref.cdata] = ref
        out = func(*args, **kwargs)
        self.live = {k: v for k, v in self.live.items() if not v[0].expired()}  # freed since the last op
        self.before = {k: r for k, r in self.before.items() if not r.expired()}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                storage = t.untyped_storage()
                ref = StorageWeakRef(storage)
                if ref.cdata not in self.live and ref.cdata not in self.before and storage.nbytes():
                    self.live[ref.cdata] = (ref, storage.nbytes())
        self.peak = max(self.peak, sum(n for _, n in self.live.values()))
        return out


class Measurement(NamedTuple):
    layer: str
    n: int
    seconds: float  # median of the repeats
    peak_bytes: int


def build_layers(d: int = 64, heads: int = 4, kernel: int = 3, window: int = 16,
                 seed: int = 0) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """name -> forward(x (1, n, d)) for the five layers of width ``d``."""
    torch.manual_seed(seed)
    conv = nn.Conv1d(d, d, kernel, padding=kernel // 2).eval()
    gru = nn.GRU(d, d, batch_first=True).eval()
    mha = MultiHeadAttention(d, heads).eval()
    win = masks.window(window, window)
    return {
        # channels first, contiguous: oneDNN's convolution on the strided view is several times slower
        "convolution": lambda x: conv(x.transpose(1, 2).contiguous()).transpose(1, 2),  # (1, n, d) -> (1, d, n)
        "GRU": lambda x: gru(x)[0],
        "self-attention": lambda x: mha(x, backend="math").out,
        "window attention": lambda x: mha(x, mask=win, backend="local").out,
        "linear attention": lambda x: mha(x, backend="linear_approx").out,
    }


@torch.inference_mode()
def peak_memory(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> int:
    """Peak bytes of the tensors one call of ``fn(x)`` allocates (after a warm-up call, which also
    compiles a native kernel on first use)."""
    fn(x)
    with PeakMemory() as pm:
        fn(x)
    return pm.peak


@torch.inference_mode()
def seconds(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> float:
    t = time.perf_counter()
    fn(x)
    return time.perf_counter() - t


def fit_exponent(ns: Sequence[int], ys: Sequence[float], *, tail: float = 0.5) -> float:
    """Slope of log(y) against log(n) (least squares) over the longest ``tail`` share of the sizes
    (at least three): the power of n the cost grows with, once fixed overheads stop dominating."""
    ns, ys = np.asarray(ns, dtype=float), np.asarray(ys, dtype=float)
    if len(ns) < 2 or (ys <= 0).any():
        raise ValueError(f"fit_exponent: need two or more sizes and positive costs, got n={ns}, cost={ys}")
    k = max(min(3, len(ns)), math.ceil(tail * len(ns)))
    order = np.argsort(ns)[-k:]
    return float(np.polyfit(np.log(ns[order]), np.log(ys[order]), 1)[0])


def _table(rows: list[dict], lengths: Sequence[int]) -> str:
    head = ("| layer | computation (lecture) | sequential ops | max path length | expected n^ | "
            "fitted time n^ | fitted memory n^ | " + " | ".join(f"ms at n={n}" for n in lengths) + " |")
    rule = "|" + " --- |" * (7 + len(lengths))
    lines = [head, rule]
    for r in rows:
        t = r["row"]
        lines.append(f"| {t.layer} | {t.per_layer} | {t.sequential} | {t.path} | {t.exponent} | "
                     f"{r['time_exp']:.2f} | {r['mem_exp']:.2f} | "
                     + " | ".join(f"{m.seconds * 1e3:.2f}" for m in r["points"]) + " |")
    return "\n".join(lines)


def _figure(rows: list[dict], path: Path, d: int, kernel: int, window: int) -> Path:
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    ns = [m.n for m in rows[0]["points"]]  # every layer at the same lengths
    for r in rows:
        a.loglog(ns, [m.seconds * 1e3 for m in r["points"]], "o-", label=f"{r['row'].layer}: n^{r['time_exp']:.2f}")
        b.loglog(ns, [m.peak_bytes / 2**20 for m in r["points"]], "o-",
                 label=f"{r['row'].layer}: n^{r['mem_exp']:.2f}")
    for ax, what in ((a, "forward time (ms, median)"), (b, "peak memory of its tensors (MiB)")):
        ax.set_xlabel("sequence length n")
        ax.set_xticks(ns, labels=[str(n) for n in ns])
        ax.minorticks_off()
        ax.set_ylabel(what)
        ax.grid(True, which="both", color="#eee")
        ax.legend(fontsize=8, title="fitted exponent", title_fontsize=8)
    a.set_title("time (the lecture: n^2 for self-attention, n for the others)")
    b.set_title("memory: only self-attention keeps an n x n matrix")
    fig.suptitle(f"one layer of width d = {d} on this machine (convolution k = {kernel}, window w = {window} "
                 "each side, 4 heads)", fontsize=10)
    out = save_figure(fig, path)
    plt.close(fig)
    return out


def complexity_report(out_dir: str | os.PathLike | None, lengths: Sequence[int] = (256, 512, 1024, 2048, 4096), *,
                      d: int = 64, heads: int = 4, kernel: int = 3, window: int = 16, repeats: int = 5,
                      log: Callable[[str], None] | None = None) -> dict:
    """Measure the five layers at every length; return {"rows": [...], "table": markdown} and, with
    ``out_dir``, write complexity.png and complexity.md there ({"figure", "markdown"} paths)."""
    lengths = sorted(int(n) for n in lengths)
    if len(lengths) < 3 or lengths[0] < 1:
        raise ValueError(f"complexity_report: `lengths` needs three or more positive sizes, got {lengths}")
    layers = build_layers(d, heads, kernel, window)
    inputs = {n: torch.randn(1, n, d) for n in lengths}
    points = [(row.layer, n) for row in LECTURE_TABLE for n in lengths]
    peaks = {p: peak_memory(layers[p[0]], inputs[p[1]]) for p in points}
    times: dict[tuple[str, int], list[float]] = {p: [] for p in points}
    for _ in range(repeats):  # interleaved: a busy spell of the machine spreads over every point
        for p in points:
            times[p].append(seconds(layers[p[0]], inputs[p[1]]))
    rows = []
    for row in LECTURE_TABLE:
        ms = [Measurement(row.layer, n, statistics.median(times[row.layer, n]), peaks[row.layer, n]) for n in lengths]
        if log:
            for m in ms:
                log(f"  {m.layer:>16}  n={m.n:6d}  {m.seconds * 1e3:9.3f} ms  {m.peak_bytes / 2**20:9.2f} MiB")
        rows.append({"row": row, "points": ms,
                     "time_exp": fit_exponent(lengths, [m.seconds for m in ms]),
                     "mem_exp": fit_exponent(lengths, [m.peak_bytes for m in ms])})
    res: dict = {"rows": rows, "table": _table(rows, lengths)}
    if out_dir is not None:
        out = Path(out_dir)
        res["figure"] = _figure(rows, out / "complexity.png", d, kernel, window)
        md = out / "complexity.md"
        md.write_text(f"Layers of width d = {d}, {heads} heads, convolution kernel k = {kernel}, window w = {window} "
                      f"each side; median of {repeats} forward passes; fitted on the longer half of the lengths.\n\n"
                      + res["table"] + "\n", encoding="utf-8")
        res["markdown"] = md
    return res
