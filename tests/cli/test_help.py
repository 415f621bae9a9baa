"""Every option of every command explains itself in ``--help``: what it does, its choices, its default."""

from __future__ import annotations

import argparse
import contextlib
import io
import re

import pytest

from attnkit.cli.main import build_parser
from attnkit.cli.options import HelpFormatter
from attnkit.nn.limits import Range
from attnkit.tasks import TASKS


def commands(parser: argparse.ArgumentParser, path=()):
    """(path, parser) for the root and every sub-command, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


PARSER = build_parser()
ALL = list(commands(PARSER))


def help_output(path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*path, "--help"])
    return out.getvalue()


def entries(parser, text: str) -> dict[str, str]:
    """Each option's description as printed by --help: the text between its invocation and the next one."""
    fmt = HelpFormatter(prog="x")
    actions = [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]
    marks = []
    for a in actions:
        inv = fmt._format_action_invocation(a)
        m = re.search(r"^  " + re.escape(inv) + r"(?=\s)", text, re.M)
        assert m, f"{inv!r} is not listed in the help"
        marks.append((m.start(), m.end(), inv))
    marks.sort()
    heading = re.compile(r"^\S.*:$", re.M)  # "options:", "training:", ... end a group's last entry
    out = {}
    for i, (_, end, inv) in enumerate(marks):
        stop = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        h = heading.search(text, end, stop)
        out[inv] = " ".join(text[end:h.start() if h else stop].split())
    return out


def test_the_walk_covers_every_command():
    names = {" ".join(p) for p, _ in ALL}
    assert {"", "demo", "lecture", "embed", "similarity", "attend", "train", "evaluate", "predict"} <= names
    assert {f"train {t}" for t in TASKS} <= names


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=lambda p: " ".join(p) or "attnkit")
def test_every_option_has_a_description_with_choices_and_default(path):
    parser = dict(ALL)[path]
    text = help_output(path)
    described = entries(parser, text)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        inv = HelpFormatter(prog="x")._format_action_invocation(action)
        desc = described[inv]
        assert len(desc) >= 10, f"attnkit {' '.join(path)}: {inv} has no description: {desc!r}"
        if action.choices is not None:
            for choice in action.choices:
                assert str(choice) in desc, f"{inv}: choice {choice!r} not named in {desc!r}"
        flag = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction,
                                   argparse._VersionAction))
        if action.option_strings and not flag and not action.required:
            assert "default" in desc, f"attnkit {' '.join(path)}: {inv} does not say its default: {desc!r}"
        if isinstance(action.type, Range):  # a number states what it accepts
            assert action.type.span() in desc, f"attnkit {' '.join(path)}: {inv} does not state its range: {desc!r}"
        assert action.type not in (int, float) or action.choices, \
            f"attnkit {' '.join(path)}: {inv} is a number without a Range or choices"


@pytest.mark.parametrize("task", list(TASKS))
def test_zero_is_explained_where_it_is_special(task):
    described = entries(dict(ALL)[("train", task)], help_output(("train", task)))
    for option in ("--eval-every EVAL_EVERY", "--max-steps MAX_STEPS", "--max-minutes MAX_MINUTES"):
        assert "(0 = " in described[option], described[option]
    assert "0 = at the end of each epoch" in described["--eval-every EVAL_EVERY"]
    assert "0 = no limit" in described["--max-minutes MAX_MINUTES"]
    sched = described["--schedule {linear,cosine,inverse_sqrt,constant}"]
    assert "choices: linear, cosine, inverse_sqrt, constant" in sched and "default: " in sched


def test_help_text_comes_from_the_config_fields():
    from dataclasses import fields

    from attnkit.nn import TransformerConfig
    from attnkit.train import TrainConfig

    described = entries(dict(ALL)[("train", "tagger")], help_output(("train", "tagger")))
    for cls in (TrainConfig, TransformerConfig):
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help metadata"
    lr = next(f for f in fields(TrainConfig) if f.name == "lr").metadata["help"]
    assert described["--lr LR"].startswith(lr) and "default: 0.001" in described["--lr LR"]


def test_options_a_task_ignores_are_not_offered():
    graph = help_output(("train", "graph"))
    for option in ("--d-ff", "--num-encoder-layers", "--positional", "--activation", "--norm-first"):
        assert option not in graph
    assert "--d-model" in graph and "--num-heads" in graph and "--attention-dropout" in graph
    assert "--positional" not in help_output(("train", "image"))  # its positions are always learned
    for task in ("tagger", "classifier", "speech"):
        assert "--positional" in help_output(("train", task))


def test_data_dir_is_one_name_across_tasks_with_the_old_alias():
    for task in TASKS:
        text = help_output(("train", task))
        assert "--data-dir DIR" in text and "--download" in text, task
    for task in ("tagger", "classifier", "graph"):  # these had --data-root
        args = build_parser().parse_args(["train", task, "--data-root", "/x", "--out", "r"])
        assert str(args.data_dir) == "/x"


def test_version(capsys):
    import platform

    import torch

    import attnkit

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"attnkit {attnkit.__version__} (torch {torch.__version__}, Python {platform.python_version()})"
