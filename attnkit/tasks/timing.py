"""How long ``attnkit train TASK`` takes with the task's defaults: one measured figure per task, in its ``--help``.

``TIMES`` is the one source of these figures: for each task, the run with its defaults first, then any other
setting worth a line (``--dataset mnist``). ``minutes`` is the wall clock of the whole command (data
preparation, training, dev evaluations, the closing test or BLEU), either measured by running it or estimated
from a shorter run of the same settings (``basis`` says which, and from what): the settings' steps at that
run's steps/s, plus that run's wall clock outside its training loop (data preparation, the closing
evaluation). Each figure was measured with the command alone on the machine (under the team's heavy-work
lock), unless ``basis`` says otherwise. Measure again when a task's defaults, model or data change.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

MACHINE = "a 2-core AMD EPYC (Zen 3, AVX2, no AVX-512), torch 2.13 CPU"
XEON = "a 2-core Intel Xeon (Emerald Rapids, AVX-512 with BF16), torch 2.13 CPU"
ZEN4 = "a 2-core AMD EPYC (Zen 4, AVX-512), torch 2.13 CPU"


@dataclass(frozen=True)
class TrainingTime:
    """One measured (or measured-rate estimated) training time of a task's defaults."""

    minutes: float  # wall clock of the whole ``attnkit train`` command, in minutes
    steps: str  # the optimiser steps the settings run, e.g. "about 7,800 steps"
    basis: str  # "measured", or "estimated from a 3-minute run at 7.2 steps/s"
    date: str  # of the measurement, YYYY-MM-DD
    options: str = ""  # "" for the defaults; else the options changed, e.g. "--dataset mnist"
    threads: int = 2
    machine: str = MACHINE

    def __post_init__(self) -> None:
        if not (0 < self.minutes < 100_000):
            raise ValueError(f"TrainingTime: minutes must be in (0, 100000), got {self.minutes}")
        if not (1 <= self.threads <= 1024):
            raise ValueError(f"TrainingTime: threads must be in [1, 1024], got {self.threads}")
        if len(self.date) != 10 or self.date[4] != "-" or self.date[7] != "-":
            raise ValueError(f"TrainingTime: date must be YYYY-MM-DD, got {self.date!r}")

    def duration(self) -> str:
        """``about 45 s`` under two minutes, ``about 19 min`` under two hours, else ``about 2.5 h``."""
        if self.minutes < 2:
            return f"about {round(self.minutes * 60)} s"
        if self.minutes < 120:
            return f"about {round(self.minutes)} min"
        return f"about {self.minutes / 60:.1f} h"

    def sentence(self, epochs: int) -> str:
        """``With the defaults (20 epochs, about 7,800 steps) training takes about 19 min ...``."""
        setting = f"the defaults and {self.options}" if self.options else "the defaults"
        return (f"With {setting} ({epochs} epochs, {self.steps}) training takes {self.duration()} on "
                f"{self.machine}, {self.threads} thread{'s' if self.threads > 1 else ''} ({self.basis}, {self.date}).")


TIMES: dict[str, tuple[TrainingTime, ...]] = {
    "tagger": (TrainingTime(minutes=(7840 / 13.65 + 27.5) / 60, steps="7,840 steps", date="2026-11-26",
                            basis="estimated from a 3-minute run at 13.65 steps/s with its dev evaluations"),),
    "classifier": (TrainingTime(minutes=(4212 / 17.70 + 8.1) / 60, steps="4,212 steps", date="2026-11-26",
                                basis="estimated from a 3-minute run at 17.70 steps/s with its dev evaluations"),),
    "image": (TrainingTime(minutes=55.9 / 60, steps="1,260 steps, on digits", basis="measured", date="2026-11-26"),
              TrainingTime(minutes=(51600 / 15.56 + 11) / 60, steps="51,600 steps", date="2026-11-26",
                           options="--dataset mnist",
                           basis="estimated from a 3-minute run at 15.56 steps/s with its dev evaluations")),
    "speech": (TrainingTime(minutes=(2550 / 7.72 + 11) / 60, steps="2,550 steps", date="2026-11-26",
                            basis="estimated from a 3-minute run at 7.72 steps/s"),),
    "graph": (TrainingTime(minutes=31.4 / 60, steps="300 steps, one per epoch, on Cora", basis="measured",
                           date="2026-11-26"),),
    "translate": (TrainingTime(
        minutes=60.5, steps="5,130 steps, but --max-minutes 60 stops it first, near step 1,300 here",
        basis="estimated from a 30-minute run at 0.35 steps/s with its dev evaluations", date="2026-11-26"),),
    "asr": (TrainingTime(minutes=683.95 / 60, steps="3,282 steps", date="2026-11-29", basis="measured",
                         machine=ZEN4),),
}

NOTE = "Times are the wall clock of the whole command: data preparation, training and every evaluation."


def help_text(task: str, epochs: int, width: int = 78) -> str:
    """The paragraph ``attnkit train TASK --help`` prints under the task's description: every ``TIMES`` entry
    of ``task``, then ``NOTE`` (a task without one says so); wrapped to ``width`` columns (the help keeps a
    description's own line breaks)."""
    if task not in TIMES:  # tests/cli/test_train_time_help.py requires one for every task
        return textwrap.fill(f"The defaults ({epochs} epochs) have no measured training time yet.", width)
    text = " ".join(t.sentence(epochs) for t in TIMES[task]) + " " + NOTE
    glued = re.sub(r"(\d) (s|min|h|threads|steps/s)\b", "\\1\0\\2", text)  # a number stays on its unit's line
    return textwrap.fill(glued, width).replace("\0", " ")
