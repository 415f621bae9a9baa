"""The LRA-lite suite: every variant x task cell, the table and the figure, resumable.

``run_suite(out, suite="full")`` prepares each task's data once, then runs the cells task by task,
each in its own Python process (``attnkit lra cell ...``: a clean peak-memory reading, and the exact
command that reproduces the cell), appending a row to ``out/results.jsonl`` as each finishes. Cells
already in ``results.jsonl`` are skipped, so an interrupted run continues where it stopped. At the end
(and after every task) ``out/results.md`` (tables) and ``out/lra.png`` (figure) are rewritten.
The text task runs only where the IMDb reviews exist (or with ``download``).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from ..nn.variants import VARIANTS
from .report import accuracy_table, baselines, cells_table, read_results, speed_accuracy_figure
from .settings import SUITES, suite_settings
from .tasks import prepare_task, text_available

__all__ = ["run_suite", "cell_command", "write_report"]


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


def write_report(out: Path, suite: str | None = None) -> list[dict]:
    """Rewrite ``out/results.md`` and ``out/lra.png`` from ``out/results.jsonl``; returns the rows."""
    rows = read_results(out / "results.jsonl")
    if not rows:
        return rows
    suite = suite or "/".join(sorted({str(r.get("suite", "?")) for r in rows}))
    floors_path = out / "baselines.json"
    floors = json.loads(floors_path.read_text(encoding="utf-8")) if floors_path.exists() else None
    text = [f"# LRA-lite ({suite} suite)", "",
            "Test accuracy (%); the (rule) rows learn nothing about the sequence:", "",
            accuracy_table(rows, floors), "",
            "Every cell:", "", cells_table(rows), "",
            "Reproduce a cell: the `command` field of its row in results.jsonl.", ""]
    (out / "results.md").write_text("\n".join(text), encoding="utf-8")
    speed_accuracy_figure(rows, out / "lra.png", title=f"LRA-lite ({suite})")
    return rows


def run_suite(out: str | Path, *, suite: str = "full", tasks: list[str] | None = None,
              variants: list[str] | None = None, seed: int = 0, data_dir: str | Path | None = None,
              mnist_dir: str | Path | None = None, imdb_dir: str | Path | None = None, download: bool = False,
              threads: int | None = None, isolate: bool | None = None, progress: bool = False) -> list[dict]:
    """Run the missing cells of ``suite``; returns all result rows. ``isolate``: each cell in its own process
    (default for the full suite: clean peak memory); False runs them here (default for "quick": no
    interpreter start per cell; the peak memory is then less clean)."""
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
    variants = variants or list(VARIANTS)
    for v in variants:
        if v not in VARIANTS:
            raise ValueError(f"lra: unknown variant {v!r}; known: {sorted(VARIANTS)}")
    mnist_dir = None if mnist_dir is None else Path(mnist_dir)
    imdb_dir = None if imdb_dir is None else Path(imdb_dir)
    for task in tasks:
        s = suite_settings(suite, task)
        if task == "text" and not download and not text_available(imdb_dir):
            print("lra: skipping text (no IMDb reviews here; pass --imdb-dir or --download)", flush=True)
            continue
        done = {r["variant"] for r in read_results(out / "results.jsonl") if r["task"] == task and r["seed"] == seed}
        todo = [v for v in variants if v not in done]
        data = prepare_task(task, s, data_dir, seed, mnist_dir=mnist_dir, imdb_dir=imdb_dir, download=download)
        _record_baselines(out / "baselines.json", task, baselines(data.train, data.test))
        if not todo:
            continue
        for variant in todo:
            cell_dir = out / "cells" / f"{task}-{variant}"
            cmd = cell_command(task, variant, suite, seed, cell_dir, data_dir, out / "results.jsonl", mnist_dir,
                               imdb_dir, threads)
            print(f"lra: {task} x {variant}: {shlex.join(cmd)}", flush=True)
            t0 = time.perf_counter()
            if isolate:
                subprocess.run([sys.executable, "-m", "attnkit.cli.main", *cmd[1:]], check=True)
            else:
                from .cell import run_cell

                row = run_cell(task, variant, s, data, cell_dir, seed=seed, progress=progress)
                append_result(out / "results.jsonl", {**row, "suite": suite, "command": shlex.join(cmd)})
                print(f"lra: {task} x {variant}: test accuracy {100 * row['test_accuracy']:.2f}%, "
                      f"{row['steps_per_s']:.2f} steps/s", flush=True)
            print(f"lra: {task} x {variant} done in {time.perf_counter() - t0:.0f} s", flush=True)
        write_report(out, suite)
    return write_report(out, suite)


def _record_baselines(path: Path, task: str, floors: dict[str, float]) -> None:
    have = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    have[task] = floors
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(have, indent=1), encoding="utf-8")
    tmp.replace(path)


def append_result(path: Path, row: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
