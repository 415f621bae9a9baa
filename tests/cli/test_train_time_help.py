"""Every ``attnkit train TASK --help`` states how long the task's defaults train, on a named machine, and when."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from attnkit.cli.main import build_parser
from attnkit.tasks import TASKS, task_options
from attnkit.tasks.timing import NOTE, TIMES, TrainingTime

SENTENCE = re.compile(
    r"With the defaults(?: and (?P<options>--\S+(?: \S+)*?))? \((?P<epochs>\d+) epochs, (?P<steps>[^()]*steps[^()]*)\)"
    r" training takes about (?P<amount>\d+(?:\.\d)?) (?P<unit>s|min|h)"
    r" on a 2-core (?:AMD EPYC \(Zen 3, AVX2, no AVX-512\)|AMD EPYC \(Zen 4, AVX-512\)"
    r"|Intel Xeon \(Emerald Rapids, AVX-512 with BF16\)),"
    r" torch \d+\.\d+ CPU,"
    r" (?P<threads>\d+) threads? \((?P<basis>(?:measured|estimated from )[^(),]*),"
    r" (?P<date>\d{4}-\d{2}-\d{2})\)\.")


def help_text(task: str) -> str:
    """``attnkit train TASK --help`` as printed, its lines joined by single spaces."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args(["train", task, "--help"])
    return " ".join(out.getvalue().split())


@pytest.mark.parametrize("task", list(TASKS))
def test_the_help_states_the_default_training_time(task):
    text = help_text(task)
    found = list(SENTENCE.finditer(text))
    defaults = [m for m in found if m["options"] is None]
    assert len(defaults) == 1, f"train {task} --help states no (or several) default training times: {text[:600]}"
    m = defaults[0]
    assert int(m["epochs"]) == task_options(task).TRAIN_DEFAULTS["epochs"]  # the defaults the help lists
    assert int(m["threads"]) >= 1 and float(m["amount"]) > 0
    assert m["date"].startswith("20")
    assert " ".join(NOTE.split()) in text  # what the time includes
    assert len(found) == len(TIMES[task])  # every recorded setting is printed


def test_every_task_has_exactly_one_default_entry():
    assert set(TIMES) == set(TASKS)
    for task, entries in TIMES.items():
        assert [t.options for t in entries].count("") == 1, task
        assert entries[0].options == "", f"{task}: the defaults come first"


def test_durations_read_in_seconds_minutes_or_hours():
    t = dict(steps="100 steps", basis="measured", date="2026-11-26")
    assert TrainingTime(minutes=0.75, **t).duration() == "about 45 s"
    assert TrainingTime(minutes=19.4, **t).duration() == "about 19 min"
    assert TrainingTime(minutes=150, **t).duration() == "about 2.5 h"
    assert TrainingTime(minutes=19.4, **t).sentence(20).startswith(
        "With the defaults (20 epochs, 100 steps) training takes about 19 min on a 2-core AMD EPYC")


@pytest.mark.parametrize("bad, word", [(dict(minutes=0), "minutes"), (dict(threads=0), "threads"),
                                       (dict(date="26-11-2026"), "date")])
def test_a_bad_entry_is_refused(bad, word):
    t = dict(minutes=1.0, steps="100 steps", basis="measured", date="2026-11-26") | bad
    with pytest.raises(ValueError, match=word):
        TrainingTime(**t)
