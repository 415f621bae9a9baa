"""One experiment's scaffold, the same for the three (``data_size``, ``rnn``, ``positions``): its config's shared
fields and checks, its run into a folder, and the summaries and Markdown file its report starts from.

- fields: ``trained_field(choices)`` (the models, or encodings, to train: all by default, a comma-separated list of
  some on the command line), ``seeds_field(what)`` (seeds per point), ``lr_field(default, of)`` (AdamW's peak
  learning rate);
- ``check(config, choices=..., whole=..., heads=...)``: what every config's ``__post_init__`` checks first;
- ``measure(out, experiment, config, jobs, work, describe, ...)``: the run folder (``runner.RunFolder``: rows
  already there are kept) and the jobs not yet done, run by ``runner.run_jobs``; the caller adds what else it
  measures and ``finish``es the folder;
- ``results(rows, trained)``: test and dev accuracy over the seeds, the models present, their parameter counts;
  ``write_markdown(path, lines)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..nn.limits import check_fields, check_unique, floats, ints
from .runner import RunFolder, run_jobs, summarize

__all__ = ["trained_field", "seeds_field", "lr_field", "check", "measure", "Results", "results", "write_markdown"]

LR = floats(0, 1, open_low=True)


def trained_field(choices: tuple[str, ...], what: str = "the models to train"):
    """The config field of what an experiment trains: every one of ``choices`` by default."""
    return field(default=choices, metadata={"help": what, "choices": choices})


def seeds_field(what: str):
    """The config field of the seeds per point, 3 by default; ``what`` says what a seed sets."""
    return field(default=3, metadata={"help": f"seeds per point (0, 1, ...): {what}", "range": ints(1, 100)})


def lr_field(default: float, of: str = ""):
    """A config field of AdamW's peak learning rate (``of``: " for the GRU", ...)."""
    return field(default=default, metadata={"help": f"AdamW's peak learning rate{of}", "range": LR})


def check(config, *, choices: dict[str, tuple[str, ...]] | None = None,
          whole: dict[str, tuple[int, int]] | None = None, heads: int | None = None) -> None:
    """Every field's range (``check_fields``); the list fields of ``choices`` and ``whole`` name each value once,
    are not empty and hold only ``choices[name]``, or whole numbers in ``whole[name]`` = [lo, hi]; ``heads``:
    ``d_model`` a multiple of it. A ValueError ``Config: `field` ...``."""
    choices, whole = choices or {}, whole or {}
    name = type(config).__name__
    check_fields(config)
    check_unique(config, *whole, *choices)
    for f, (lo, hi) in whole.items():
        values = getattr(config, f)
        if not values or any(not isinstance(n, int) or n < lo or n > hi for n in values):
            raise ValueError(f"{name}: `{f}` must be whole numbers in [{lo}, {hi}], got {values}")
    for f, allowed in choices.items():
        values = getattr(config, f)
        if not values or any(v not in allowed for v in values):
            raise ValueError(f"{name}: `{f}` must be some of {allowed}, got {values}")
    if heads is not None and config.d_model % heads:
        raise ValueError(f"{name}: `d_model` must be a multiple of the {heads} heads, got {config.d_model}")


def measure(out: str | os.PathLike, experiment: str, config, jobs: Callable[[RunFolder], Sequence[tuple]],
            work: Callable[[tuple], list[dict]], describe: Callable[[dict], str], *, command: str | None,
            workers: int, threads: int | None, log: Callable[[str], None],
            max_minutes: float | None) -> RunFolder:
    """``out`` as ``experiment``'s run folder for ``config``; ``jobs(folder)``, the jobs whose rows it does not
    hold yet, run by ``work`` in ``workers`` processes of ``threads`` torch threads (each row logged with
    ``describe``) until ``max_minutes``. Returns the folder (its ``rows``; ``finish`` it)."""
    folder = RunFolder(out, experiment, config, command=command, log=log, max_minutes=max_minutes)
    run_jobs(folder, jobs(folder), work, workers=workers, threads=threads, describe=describe)
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
