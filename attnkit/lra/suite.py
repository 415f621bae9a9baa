"""The LRA-lite suite: every task x variant x seed cell, the tables and the figures, resumable.

``run_suite(out, suite="full")`` prepares each task's data once per seed, then runs the cells task by
task, each in its own Python process (``attnkit lra cell ...``: a clean peak-memory reading, and the
exact command that reproduces the cell), appending a row to ``out/results.jsonl`` as each finishes.
Cells already in ``results.jsonl`` are skipped, so an interrupted run continues where it stopped, and a
suite can be run a few tasks at a time into one folder. After every task ``out/results.md`` (tables),
``out/lra.png`` (speed against accuracy) and ``out/lra_curves.png`` (dev accuracy during training)
are rewritten. The seconds spent generating data are kept in ``out/timings.json``. The text task runs
only where the IMDb reviews exist (or with ``download``).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from ..nn.variants import VARIANTS
from .depth import rule_by_depth
from .figures import curves_figure, speed_accuracy_figure
from .report import accuracy_table, baselines, cells_table, commands_table, depth_table, read_results
from .settings import SEEDS, SUITES, suite_settings
from .tasks import prepare_task, text_available

__all__ = ["run_suite", "cell_command", "write_report", "append_result"]


def cell_command(task: str, variant: str, suite: str, seed: int, cell_dir: Path, data_dir: Path,
                 results: Path | None = None, mnist_dir: Path | None = None, imdb_dir: Path | None = None,
                 threads: int | None = None) -> list[str]:
    """The command line that runs (and reproduces) one cell."""
    cmd = ["attnkit", "lra", "cell", "--task", task, "--variant", variant, "--suite", suite, "--seed", str(seed),
           "--out", str(cell_dir), "--data-dir", str(data_dir)]
    if results is not None:
        cmd += ["--results", str(results)]
    if mnist_dir is not None:
        cmd += ["--mnist-dir", str(mnist_dir)]
    if imdb_dir is not None:
        cmd += ["--imdb-dir", str(imdb_dir)]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    return cmd


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1), encoding="utf-8")
    tmp.replace(path)


def write_report(out: Path, suite: str | None = None) -> list[dict]:
    """Rewrite ``out/results.md``, ``out/lra.png`` and ``out/lra_curves.png`` from ``out/results.jsonl``."""
    rows = read_results(out / "results.jsonl")
    if not rows:
        return rows
    suite = suite or "/".join(sorted({str(r.get("suite", "?")) for r in rows}))
    floors = _read_json(out / "baselines.json")
    timings = _read_json(out / "timings.json")
    cells = sum(r.get("train_seconds", 0.0) for r in rows)
    data = sum(t for per_seed in timings.values() for t in per_seed.values())
    text = [f"# LRA-lite ({suite} suite)", "",
            "Test accuracy (%), mean (min-max) over the seeds; the (rule) and (chance) rows learn nothing about "
            "the sequence:", "", accuracy_table(rows, floors), "",
            "Per task and variant (means over the seeds):", "", cells_table(rows), "",
            depth_table(rows, floors),
            f"Training time of the cells (self-pretraining included): {cells / 60:.1f} min; data generation and "
            f"loading: {data / 60:.1f} min.", "",
            "Every cell and the command that reproduces it:", "", commands_table(rows), ""]
    (out / "results.md").write_text("\n".join(text), encoding="utf-8")
    speed_accuracy_figure(rows, out / "lra.png", title=f"LRA-lite ({suite})")
    curves_figure(rows, out / "lra_curves.png", [t for t in SUITES.get(suite, {}) if t != "text"] or
                  sorted({r["task"] for r in rows}), title=f"LRA-lite ({suite})")
    return rows


def _record(out: Path, task: str, seed: int, data, seconds: float) -> None:
    """The task's rules (``baselines``; ListOps also per depth) and the seconds its data took, for this seed."""
    floors = _read_json(out / "baselines.json")
    b = baselines(data.train, data.test, data.num_classes)
    if task.startswith("listops"):
        b["by_depth"] = rule_by_depth(data.train, data.test)
    floors.setdefault(task, {})[str(seed)] = b
    _write_json(out / "baselines.json", floors)
    timings = _read_json(out / "timings.json")
    timings.setdefault(task, {}).setdefault(str(seed), seconds)  # the first preparation (generation) counts
    _write_json(out / "timings.json", timings)


def run_suite(out: str | Path, *, suite: str = "full", tasks: list[str] | None = None,
              variants: list[str] | None = None, seeds: list[int] | None = None, data_dir: str | Path | None = None,
              mnist_dir: str | Path | None = None, imdb_dir: str | Path | None = None, download: bool = False,
              threads: int | None = None, isolate: bool | None = None, progress: bool = False) -> list[dict]:
    """Run the missing cells of ``suite``; returns all result rows. ``seeds``: default 0, 1, 2 (quick: 0).
    ``isolate``: each cell in its own process (default for the full suite: clean peak memory); False runs
    them here (default for "quick": no interpreter start per cell; the peak memory is then less clean)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if isolate is None:
        isolate = suite != "quick"
    if threads is None and suite == "quick":
        threads = 1  # tiny tensors: one thread avoids OpenMP hand-offs that stall on a busy machine
    if threads is not None and not isolate:
        import torch

        torch.set_num_threads(threads)
    data_dir = Path(data_dir) if data_dir is not None else out / "data"
    tasks = tasks or list(SUITES[suite])
    seeds = list(seeds if seeds is not None else (SEEDS if suite != "quick" else (0,)))
    variants = variants or list(VARIANTS)
    for v in variants:
        if v not in VARIANTS:
            raise ValueError(f"lra: unknown variant {v!r}; known: {sorted(VARIANTS)}")
    mnist_dir = None if mnist_dir is None else Path(mnist_dir)
    imdb_dir = None if imdb_dir is None else Path(imdb_dir)
    for task in tasks:
        s = suite_settings(suite, task)
        if s.task == "text" and not download and not text_available(imdb_dir):
            print("lra: skipping text (no IMDb reviews here; pass --imdb-dir or --download)", flush=True)
            continue
        for seed in seeds:
            done = {r["variant"] for r in read_results(out / "results.jsonl") if r["task"] == task
                    and r["seed"] == seed}
            t0 = time.perf_counter()
            data = prepare_task(s, data_dir, seed, mnist_dir=mnist_dir, imdb_dir=imdb_dir, download=download)
            _record(out, task, seed, data, time.perf_counter() - t0)
            for variant in [v for v in variants if v not in done]:
                _run_one(out, suite, task, variant, seed, s, data, data_dir, mnist_dir, imdb_dir, threads, isolate,
                         progress)
        write_report(out, suite)
    return write_report(out, suite)


def _run_one(out, suite, task, variant, seed, s, data, data_dir, mnist_dir, imdb_dir, threads, isolate, progress):
    cell_dir = out / "cells" / f"{task}-{variant}-seed{seed}"
    cmd = cell_command(task, variant, suite, seed, cell_dir, data_dir, out / "results.jsonl", mnist_dir, imdb_dir,
                       threads)
    print(f"lra: {task} x {variant} (seed {seed}): {shlex.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    if isolate:
        subprocess.run([sys.executable, "-m", "attnkit.cli.main", *cmd[1:]], check=True)
    else:
        from .cell import run_cell

        row = run_cell(task, variant, s, data, cell_dir, seed=seed, progress=progress)
        append_result(out / "results.jsonl", {**row, "label": s.label or task, "suite": suite,
                                              "command": shlex.join(cmd)})
        print(f"lra: {task} x {variant}: test accuracy {100 * row['test_accuracy']:.2f}%, "
              f"{row['steps_per_s']:.2f} steps/s", flush=True)
    print(f"lra: {task} x {variant} (seed {seed}) done in {time.perf_counter() - t0:.0f} s", flush=True)


def append_result(path: Path, row: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
