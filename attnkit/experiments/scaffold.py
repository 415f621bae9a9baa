"""One experiment's run scaffold, the same for the three (``data_size``, ``rnn``, ``positions``): its run into a
folder, and the summaries and Markdown file its report starts from. (Their configs' shared fields and checks are
in ``configs.fields``, without torch.)

- ``measure(out, experiment, config, jobs, work, describe, ...)``: the run folder (``runner.RunFolder``: rows
  already there are kept) and the jobs not yet done, run by ``runner.run_jobs``; the caller adds what else it
  measures and ``finish``es the folder;
- ``results(rows, trained)``: test and dev accuracy over the seeds, the models present, their parameter counts;
  ``write_markdown(path, lines)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .runner import RunFolder, run_jobs, summarize

__all__ = ["measure", "Results", "results", "write_markdown"]


def measure(out: str | os.PathLike, experiment: str, config, jobs: Callable[[RunFolder], Sequence[tuple]],
            work: Callable[[tuple], list[dict]], describe: Callable[[dict], str], *, command: str | None,
            workers: int, threads: int | None, log: Callable[[str], None],
            max_minutes: float | None, name: Callable[[tuple], str] | None = None) -> RunFolder:
    """``out`` as ``experiment``'s run folder for ``config``; ``jobs(folder)``, the jobs whose rows it does not
    hold yet, run by ``work`` in ``workers`` processes of ``threads`` torch threads (each row logged with
    ``describe``, a job under way named by ``name``) until ``max_minutes``. Returns the folder (its ``rows``;
    ``finish`` it)."""
    folder = RunFolder(out, experiment, config, command=command, log=log, max_minutes=max_minutes)
    run_jobs(folder, jobs(folder), work, workers=workers, threads=threads, describe=describe, name=name)
    return folder


@dataclass
class Results:
    test: list[dict]  # ``runner.summarize`` of the test accuracy: mean and spread over the seeds per (model, x)
    dev: list[dict]  # the same of the dev accuracy
    present: tuple[str, ...]  # the models trained that have rows, in the config's order
    params: dict[str, int]  # each one's parameter count (the largest of its rows)


def results(rows: list[dict], trained: Sequence[str]) -> Results:
    """A run's rows (``{"model", "x", "seed", "test_accuracy", "dev_accuracy", "params", ...}``) summarised."""
    present = tuple(m for m in trained if any(r["model"] == m for r in rows))
    return Results(summarize(rows, "test_accuracy"), summarize(rows, "dev_accuracy"), present,
                   {m: max(r["params"] for r in rows if r["model"] == m) for m in present})


def write_markdown(path: str | os.PathLike, lines: list[str]) -> Path:
    """``lines`` as the report's Markdown file; returns its path."""
    path = Path(path)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
