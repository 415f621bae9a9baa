"""Every numeric option of every command, fuzzed in-process: 0, -1, huge, NaN, inf, wrong types.

The options come from the parsers themselves (a new option is fuzzed without touching this file). Each value
is either refused while parsing (exit 2, one line on stderr naming the command and the option) or accepted,
and an accepted value then passes the validation the command runs next (the config dataclasses, the
decoding options) or fails it with a one-line ValueError; never a traceback, and nothing large is allocated
on the way.
"""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from attnkit.cli.decoding import generate_kwargs
from attnkit.cli.main import build_parser
from attnkit.lra.memory import peak_memory
from attnkit.nn import TransformerConfig
from attnkit.nn.limits import Range
from attnkit.tasks.options import config_from_args
from attnkit.train import TrainConfig

VALUES = ("0", "-1", "1", "1e9", "1000000000", str(2**70), "nan", "inf", "-inf", "x", "", "0.5", "1e-45")
PARSER = build_parser()


def commands(parser: argparse.ArgumentParser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))
    yield path, parser


def required(parser: argparse.ArgumentParser) -> list[str]:
    """Arguments that make the command parse: a value per positional and per required option."""
    argv = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction) or not (a.required or not a.option_strings):
            continue
        if a.nargs == 0 or isinstance(a, argparse._HelpAction):
            continue
        value = str(next(iter(a.choices))) if a.choices else "x"
        argv += [value] if not a.option_strings else [a.option_strings[0], value]
    return argv


def numeric_options():
    """(command path, option string, its type) of every option whose values are parsed by a type."""
    out = []
    for path, parser in commands(PARSER):
        for a in parser._actions:
            if a.option_strings and a.type is not None and a.type not in (str,) and a.nargs != 0 \
                    and getattr(a.type, "__name__", "") not in ("Path", "PosixPath", "out_path"):  # paths
                out.append((path, a.option_strings[0], a.type))
    return out


OPTIONS = numeric_options()


def test_every_numeric_option_has_a_stated_range():
    assert len(OPTIONS) > 100  # every task's training options, decoding, lra, embed, ...
    plain = [(" ".join(p), flag) for p, flag, t in OPTIONS if t in (int, float) and not _action(p, flag).choices]
    assert plain == [], f"options without a Range or choices: {plain}"
    unbounded = [(" ".join(p), flag) for p, flag, t in OPTIONS if isinstance(t, Range) and abs(t.high) >= 1e300]
    assert unbounded == [], f"config fields without metadata['range']: {unbounded}"
    for path, flag, t in OPTIONS:  # every default lies in its range
        action = _action(path, flag)
        if isinstance(t, Range) and action.default not in (None, argparse.SUPPRESS):
            assert t.contains(action.default), (path, flag, action.default)


def _action(path: tuple[str, ...], flag: str) -> argparse.Action:
    return next(a for a in dict(commands(PARSER))[path]._actions if flag in a.option_strings)


def _validate(path: tuple[str, ...], args: argparse.Namespace) -> None:
    """What the command checks right after parsing, before it reads or builds anything."""
    if path[:1] == ("train",):
        config_from_args(TrainConfig, args)
        config_from_args(TransformerConfig, args)
    if hasattr(args, "default_beam"):  # translate, evaluate
        for decoder in ("ar", "nat"):
            with contextlib.suppress(ValueError):  # options of the other decoder: a one-line ValueError
                generate_kwargs(args, decoder, path[0])


def _one_case(path, flag, value) -> tuple[str, str]:
    argv = [*path, *required(dict(commands(PARSER))[path]), flag, value]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = PARSER.parse_args(argv)
    except SystemExit as e:
        assert e.code == 2, (argv, e.code)
        lines = err.getvalue().splitlines()
        assert len(lines) == 1, (argv, err.getvalue())
        assert lines[0].startswith(f"attnkit {' '.join(path)}: error: "), (argv, lines)
        assert flag in lines[0] or "expected one argument" in lines[0], (argv, lines)
        return "refused", lines[0]
    try:
        _validate(path, args)
    except ValueError as e:
        assert "\n" not in str(e) and str(e), (argv, str(e))
        return "invalid", str(e)
    return "accepted", ""


@pytest.mark.parametrize("path,flag", [(p, f) for p, f, _ in OPTIONS], ids=lambda x: " ".join(x) if
                         isinstance(x, tuple) else x)
def test_fuzz_one_option(path, flag):
    outcomes, peak = peak_memory(lambda: {v: _one_case(path, flag, v) for v in VALUES})
    assert peak is None or peak < 64, f"{flag}: the resident memory rose by {peak:.0f} MB while parsing and validating"
    for v in ("nan", "inf", "-inf", "x", "", str(2**70)):
        assert outcomes[v][0] != "accepted", (path, flag, v, outcomes[v])  # never a silent NaN, inf or overflow
    t = next(t for p, f, t in OPTIONS if (p, f) == (path, flag))
    if isinstance(t, Range):  # an accepted value is in the stated range, a refused one is not
        for v, (outcome, _) in outcomes.items():
            assert (outcome == "refused") == (not _parses(t, v)), (path, flag, v, outcome)


def _parses(t: Range, v: str) -> bool:
    try:
        t(v)
    except argparse.ArgumentTypeError:
        return False
    return not v.startswith("-") or v[1:2].isdigit()  # argparse reads "-inf" as an option, not a value
