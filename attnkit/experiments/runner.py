"""What the experiments share: seeds, a training loop bounded by steps, ``results.jsonl`` (resumable),
the machine's state, and the table of means and spreads over seeds.

A run folder holds ``run.json`` (the experiment, its config, the machine) and ``results.jsonl`` (one row per
trained model: ``{"model", "x", "seed", ...measurements}``; ``x`` is the experiment's axis: training-set
size, sequence length). A row is appended as soon as its model is done; running the same config into the same
folder again skips the rows already there, so an interrupted run continues where it stopped. ``seeds`` alone may
differ between runs into one folder: ``--seeds 1`` then ``--seeds 3`` adds seeds 1 and 2 to seed 0 (a long
experiment run one seed group at a time); a run uses, and reports, only the rows of its seeds 0 to seeds - 1.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..train import progress
from ..train.schedule import lr_factor
from ..train.state import seed_everything

__all__ = ["RunFolder", "run_jobs", "machine", "load_average", "train_steps", "accuracy", "summarize", "mean_table",
           "seeds_text", "param_count"]


def load_average() -> str:
    """The machine's load over 1, 5 and 15 minutes, as ``uptime`` prints it."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - platforms without it
        return "n/a"


def machine() -> dict:
    """What a timing depends on: CPU, torch threads, versions, whether attnkit's native kernels run here."""
    from ..functional.native import cpu_isa, unavailable

    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "native_kernels": unavailable() or f"available ({cpu_isa()})",
            "load_average": load_average(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class RunFolder:
    """``out/run.json`` + ``out/results.jsonl`` of one experiment; rows of an earlier run of the same config
    (``seeds`` aside) are kept and skipped. A folder holding another experiment's or config's results is
    refused."""

    def __init__(self, out: str | os.PathLike, experiment: str, config, *, command: str | None = None,
                 log: Callable[[str], None] = print, max_minutes: float | None = None):
        self.out, self.log, self.t0 = Path(out), log, time.perf_counter()
        self.max_minutes, self.jobs_left = max_minutes, 0
        self.out.mkdir(parents=True, exist_ok=True)
        self.results, self.meta_path = self.out / "results.jsonl", self.out / "run.json"
        settings = {"experiment": experiment, "config": asdict(config)}
        seeds = settings["config"].get("seeds")
        self.rows: list[dict] = []
        if self.results.exists() and self.meta_path.exists():
            old = json.loads(self.meta_path.read_text(encoding="utf-8"))
            if _but_seeds({k: old.get(k) for k in settings}) != _but_seeds(settings):
                raise ValueError(f"{self.out} holds results of another experiment or config ({old.get('experiment')}"
                                 f"); choose another --out folder or delete {self.results}")
            self.rows = [row for row in (json.loads(line) for line in
                                         self.results.read_text(encoding="utf-8").splitlines() if line.strip())
                         if seeds is None or row["seed"] < seeds]
        elif self.results.exists():
            raise ValueError(f"{self.results} exists without its run.json; choose another --out folder")
        earlier = []
        if self.rows:  # the runs that made the rows kept: their commands, wall times and loads
            earlier = [*old.get("earlier_runs", []), {k: old.get(k) for k in ("command", "wall_seconds")} | {
                "seeds": old.get("config", {}).get("seeds"),
                "load_average": old.get("machine_at_start", {}).get("load_average"),
                "date": old.get("machine_at_start", {}).get("date")}]
        self.meta = {**settings, "command": command, "resumed_rows": len(self.rows), "earlier_runs": earlier,
                     "machine_at_start": machine()}
        self.meta_path.write_text(json.dumps(self.meta, indent=1) + "\n", encoding="utf-8")
        if self.rows:
            log(f"{len(self.rows)} results already in {self.results}: those runs are skipped")

    def done(self, model: str, x, seed: int) -> dict | None:
        return next((r for r in self.rows if (r["model"], r["x"], r["seed"]) == (model, x, seed)), None)

    def out_of_time(self) -> bool:
        """Whether ``max_minutes`` have passed since the folder was opened (never, without a limit)."""
        return self.max_minutes is not None and time.perf_counter() - self.t0 > 60 * self.max_minutes

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        with open(self.results, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        return row

    def finish(self, extra: dict | None = None) -> dict:
        """Record the wall time and the machine at the end (its load shows whether the timings ran on a quiet
        machine); returns the run's metadata."""
        self.meta = {**self.meta, "wall_seconds": time.perf_counter() - self.t0, "machine_at_end": machine(),
                     "max_minutes": self.max_minutes, "jobs_left": self.jobs_left, **(extra or {})}
        self.meta_path.write_text(json.dumps(self.meta, indent=1) + "\n", encoding="utf-8")
        return self.meta


def _but_seeds(settings: dict) -> dict:
    """``{"experiment", "config"}`` as JSON holds it, the config's ``seeds`` left out."""
    out = json.loads(json.dumps(settings))
    if isinstance(out.get("config"), dict):
        out["config"].pop("seeds", None)
    return out


def _worker_init(threads: int) -> None:
    torch.set_num_threads(threads)


def run_jobs(folder: RunFolder, jobs: Sequence[tuple], work: Callable[[tuple], list[dict]], *, workers: int = 1,
             threads: int | None = None, describe: Callable[[dict], str] = str,
             name: Callable[[tuple], str] | None = None) -> list[dict]:
    """``work(job)`` -> rows for every job, each row appended to ``folder`` (and logged with ``describe``) as its
    job finishes. ``workers`` = 1: one after another in this process; more: that many worker processes (spawned,
    each with ``threads`` torch threads, default 1), ``work`` a module-level function, a job handed to a worker
    only when one is free; while they run, this process logs which jobs are under way (``name(job)``, default
    "job K"), how many are done and the time left at least every ``progress.PLAIN_EVERY`` seconds. Every job
    seeds itself, so the rows are the same whichever way they run, only their order in results.jsonl differs.
    Once ``folder.out_of_time()``, no job starts (those under way finish); ``folder.jobs_left`` counts the rest."""
    folder.jobs_left = len(jobs)
    done = _Done(len(jobs))
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            if folder.out_of_time():
                break
            rows = work(job)
            folder.jobs_left -= 1
            for row in rows:
                folder.log(describe(folder.add(row)) + done.say(len(jobs) - folder.jobs_left))
        return folder.rows
    named = [(name(job) if name else f"job {k + 1}", job) for k, job in enumerate(jobs)]
    _run_in_workers(folder, named, work, workers, threads or 1, lambda row: describe(folder.add(row)), done)
    return folder.rows


def _run_in_workers(folder: RunFolder, named: list[tuple[str, tuple]], work: Callable[[tuple], list[dict]],
                    workers: int, threads: int, add: Callable[[dict], str], done: _Done) -> None:
    """``run_jobs`` in ``workers`` processes: (name, job) pairs handed out as workers come free, each finished job's
    rows ``add``ed and logged, and at least every ``WAIT_LINE`` seconds without a line, the jobs under way."""
    todo, running, last = list(named), {}, progress.clock()  # running: future -> (name, when it started)
    with worker_pool(workers, threads) as pool:
        while todo or running:
            while todo and len(running) < workers and not folder.out_of_time():
                what, job = todo.pop(0)
                running[pool.submit(work, job)] = (what, progress.clock())
            if not running:
                break
            finished, _ = wait(running, timeout=max(0.0, WAIT_LINE - (progress.clock() - last)),
                               return_when=FIRST_COMPLETED)
            for future in finished:
                running.pop(future)
                folder.jobs_left -= 1
                for row in future.result():
                    folder.log(add(row) + done.say(done.total - folder.jobs_left))
                last = progress.clock()
            now = progress.clock()
            if running and now - last >= WAIT_LINE:
                under_way = "; ".join(f"{what} ({progress.clock_text(now - t)})" for what, t in running.values())
                folder.log(f"  under way: {under_way}" + done.say(done.total - folder.jobs_left))
                last = now


# The longest this process waits for its workers without a line (a little under progress.PLAIN_EVERY, so the time
# the loop itself takes keeps the gap under it).
WAIT_LINE = progress.PLAIN_EVERY - 0.5


def worker_pool(workers: int, threads: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes of ``threads`` torch threads each (no fork of a process that already runs
    OpenMP threads)."""
    import multiprocessing

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                               initargs=(threads,))


class _Done:
    """`` [3/36 runs, 1:02 in, about 6:40 left]``: how far a run of ``total`` jobs is, read from ``progress.clock``."""

    def __init__(self, total: int):
        self.total, self.start = total, progress.clock()

    def say(self, done: int) -> str:
        spent = progress.clock() - self.start
        left = spent / done * (self.total - done) if done else None
        return (f"  [{done}/{self.total} runs, {progress.clock_text(spent)} in"
                + (f", about {progress.clock_text(left)} left]" if left is not None else "]"))


def train_steps(model: nn.Module, batch: Callable[[int], tuple[tuple[Tensor, ...], Tensor]], steps: int, *,
                lr: float, weight_decay: float = 0.01, warmup: int = 0, clip: float = 1.0, seed: int = 0,
                forward: Callable[..., Tensor] | None = None, what: str = "training") -> list[float]:
    """AdamW for ``steps`` steps, linear warm-up then cosine decay to 0, gradient clipping, cross-entropy.

    ``batch(step) -> (inputs, targets)``: the model sees ``model(*inputs)`` -> logits (N, C) (or
    ``forward(model, *inputs)``) against targets (N,) (entries -100 are skipped). Seeds every generator with
    ``seed`` first. Returns the seconds of every step (forward, backward and update). While it trains, a plain line
    ``what: 300/1000 steps  (0:12 in, about 0:28 left)`` at least every 10 s (``progress.Ticker``)."""
    seed_everything(seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    times, tick = [], progress.Ticker(what, steps, "steps")
    for step in range(steps):
        inputs, target = batch(step)
        for g in opt.param_groups:
            g["lr"] = lr * lr_factor("cosine", step, warmup, steps)
        t = time.perf_counter()
        logits = forward(model, *inputs) if forward else model(*inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
        if not torch.isfinite(loss):
            raise ValueError(f"training diverged at step {step} (loss {loss.item()}); try a lower learning rate")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        times.append(time.perf_counter() - t)
        tick.update()
    model.eval()
    return times


@torch.inference_mode()
def accuracy(model: nn.Module, batches: Iterable[tuple[tuple[Tensor, ...], Tensor]],
             forward: Callable[..., Tensor] | None = None) -> float:
    """Share of targets (entries -100 skipped) the model's arg-max gets right, over all ``batches``."""
    model.eval()
    right = total = 0
    for inputs, target in batches:
        logits = forward(model, *inputs) if forward else model(*inputs)
        keep = target != -100
        right += int((logits.argmax(-1) == target)[keep].sum())
        total += int(keep.sum())
    return right / max(total, 1)


def run_notes(meta: dict) -> list[str]:
    """Markdown lines on how the numbers were made: the command, wall time, machine, load, native kernels."""
    start, end = meta.get("machine_at_start", {}), meta.get("machine_at_end", {})
    lines = []
    if meta.get("command"):
        lines.append(f"- Command: `{meta['command']}`")
    if meta.get("wall_seconds") is not None:
        lines.append(f"- Wall time: {meta['wall_seconds'] / 60:.1f} min"
                     + (f" (continuing a run: {meta['resumed_rows']} rows were already done)"
                        if meta.get("resumed_rows") else "") + ".")
    for run in meta.get("earlier_runs", []):
        lines.append(f"- Earlier run into the same folder: `{run.get('command')}` ({run.get('seeds')} seed(s)"
                     + (f", {run['wall_seconds'] / 60:.1f} min" if run.get("wall_seconds") is not None else "")
                     + f", started {run.get('date')}, load average {run.get('load_average')}).")
    if meta.get("jobs_left"):
        lines.append(f"- Incomplete: stopped after --max-minutes {meta['max_minutes']:g} with {meta['jobs_left']} "
                     "run(s) still to make; the same command again adds them.")
    if start:
        lines.append(f"- Machine: {start['cpu']}, {start['cores']} cores, {start['torch_threads']} torch thread(s), "
                     f"torch {start['torch']}; load average (1, 5, 15 min) {start['load_average']} at the start"
                     + (f", {end['load_average']} at the end" if end else "") + f"; started {start['date']}.")
        if not start["native_kernels"].startswith("available"):
            lines.append(f"- attnkit's native kernels do not run here ({start['native_kernels']}): every attention "
                         "ran on its PyTorch path.")
    return lines


def seeds_text(n: int) -> str:
    """'1 seed', '3 seeds'."""
    return f"{n} seed" + ("s" if n != 1 else "")


def summarize(rows: Sequence[dict], value: str) -> list[dict]:
    """Rows grouped by (model, x): ``{"model", "x", "mean", "std", "n", "values"}`` of ``value`` over seeds
    (``std``: the sample standard deviation, 0 for one seed; None values, a run that could not be made, are
    left out and counted in ``"missing"``), in the rows' order of first appearance."""
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["model"], r["x"]), []).append(r.get(value))
    out = []
    for (model, x), vals in groups.items():
        ok = [float(v) for v in vals if v is not None and math.isfinite(float(v))]
        out.append({"model": model, "x": x, "n": len(ok), "missing": len(vals) - len(ok), "values": ok,
                    "mean": statistics.fmean(ok) if ok else None,
                    "std": statistics.stdev(ok) if len(ok) > 1 else 0.0 if ok else None})
    return out


def mean_table(summary: Sequence[dict], models: Sequence[str], x_label: str, *, scale: float = 100.0,
               digits: int = 1, names: dict[str, str] | None = None) -> str:
    """A Markdown table, one row per x (ascending) and one column per model: ``mean ± std`` (times ``scale``);
    ``n/a`` where no run gave a number."""
    names = names or {}
    xs = sorted(dict.fromkeys(s["x"] for s in summary))
    cell = {(s["model"], s["x"]): s for s in summary}
    lines = [f"| {x_label} | " + " | ".join(names.get(m, m) for m in models) + " |",
             "| ---: |" + " ---: |" * len(models)]
    for x in xs:
        parts = []
        for m in models:
            s = cell.get((m, x))
            if s is None or s["mean"] is None:
                parts.append("n/a")
            else:
                parts.append(f"{s['mean'] * scale:.{digits}f} ± {s['std'] * scale:.{digits}f}")
        lines.append(f"| {x} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def chance_note(summary: Sequence[dict], *, chance: float, samples: Callable[[int], int], real: str,
                names: dict[str, str] | None = None) -> list[str]:
    """Lines for the terminal: the chance level, and which models' results are all within noise of it. A point
    (its mean over seeds, of ``samples(x)`` scored items per seed) is within noise when it is less than two
    standard errors from ``chance``: of a guesser's binomial error, or of the seeds' spread if that is larger.
    When every result is, a last line says so and names ``real``, the command (and its time) giving a real
    answer."""
    names = names or {}
    at: dict[str, bool] = {}
    for s in summary:
        if s["mean"] is None:
            continue
        n = max(1, samples(s["x"]) * s["n"])
        noise = 2 * max(math.sqrt(chance * (1 - chance) / n), (s["std"] or 0.0) / math.sqrt(max(s["n"], 1)))
        at[s["model"]] = at.get(s["model"], True) and abs(s["mean"] - chance) <= noise
    near = [names.get(m, m) for m, yes in at.items() if yes]
    lines = [f"chance: {100 * chance:.1f}%" + (f"; within noise of it: {', '.join(near)}" if near else "")]
    if at and len(near) == len(at):
        lines.append(f"every result here is at chance: these sizes check the pipeline, not the claim. A real "
                     f"answer: {real}")
    return lines
