"""A fast start: ``attnkit --help`` and the ``--help`` of every command and sub-command parse without importing
torch, in well under a second; a mistyped command gets a suggestion; help shows no reST markup."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnkit.cli.main import COMMANDS, build_parser, main

from .test_help import ALL

ROOT = Path(__file__).resolve().parents[2]

# The --help whose time is measured: every command's and a sub-command of each that has them (the sub-commands'
# modules are the command's own, so the rest take the same time; test_every_help_without_torch covers them all).
TIMED = [(), *((name,) for name in COMMANDS), ("train", "asr"), ("train", "translate"), ("experiment", "positions"),
         ("lra", "generate", "pathfinder"), ("asr", "generate")]

# The child times its own import and parse (an interpreter's start is not attnkit's) and says whether torch came in.
CHILD = """
import contextlib, io, json, sys, time
t = time.perf_counter()
from attnkit.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(sys.argv[1:] + ["--help"])
    except SystemExit:
        pass
print(json.dumps({"seconds": time.perf_counter() - t, "torch": "torch" in sys.modules,
                  "numpy": "numpy" in sys.modules, "usage": out.getvalue().startswith("usage: attnkit")}))
"""

# Every command and sub-command's --help in one process, in turn: the first whose parsing brought torch in is named.
EVERY = """
import contextlib, io, json, sys
from attnkit.cli.main import build_parser, main
from tests.cli.test_help import commands
seen = []
for path, _ in commands(build_parser()):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main([*path, "--help"])
        except SystemExit:
            pass
    seen.append({"path": " ".join(path), "usage": out.getvalue().startswith("usage: attnkit"),
                 "torch": "torch" in sys.modules})
print(json.dumps(seen))
"""


def _child(code: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _help_in_a_child(path: tuple[str, ...]) -> dict:
    return json.loads(_child(CHILD, *path))


def test_every_help_without_torch():
    """``--help`` of every command and sub-command (``train asr``, ``experiment positions``, ``lra generate mqar``,
    ...) parses without importing torch: their options come from config dataclasses in modules without it."""
    seen = json.loads(_child(EVERY))
    assert len(seen) == len(ALL) and all(s["usage"] for s in seen), seen
    first = next((s["path"] or "attnkit" for s in seen if s["torch"]), None)
    assert first is None, f"attnkit {first} --help imported torch"


@pytest.mark.parametrize("path", TIMED, ids=lambda p: " ".join(p) or "attnkit")
def test_help_without_torch_under_a_second(path):
    _help_in_a_child(path)  # warm: the files' bytecode cached, as on a second call
    seen = _help_in_a_child(path)
    assert seen["usage"] and not seen["torch"], seen
    assert seen["seconds"] < 1.0, seen


def test_a_command_imports_only_its_module():
    """``attnkit export --help`` imports attnkit.cli.export, not the train command's module."""
    code = ("import sys\nfrom attnkit.cli.main import build_parser\nbuild_parser('export')\n"
            "print(sorted(m for m in sys.modules if m.startswith('attnkit.cli.')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stdout.strip() == "['attnkit.cli.export', 'attnkit.cli.main', 'attnkit.cli.options']", r.stderr


def test_summaries_are_the_commands_own():
    """``attnkit --help`` lists COMMANDS' lines without importing the modules: each is the module's own help."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    real = {a.dest: a.help for a in sub._choices_actions}
    assert real == {name: summary for name, (_, summary) in COMMANDS.items()}
    lazy = next(a for a in build_parser(None)._actions if a.dest == "command")
    assert {a.dest: a.help for a in lazy._choices_actions} == real


def test_mistyped_command_gets_a_suggestion(capsys):
    assert main(["trian", "translate"]) == 2
    assert capsys.readouterr().err == "attnkit: error: no command 'trian'; did you mean train? (see attnkit --help)\n"
    assert main(["zzz"]) == 2
    assert capsys.readouterr().err == "attnkit: error: no command 'zzz' (see attnkit --help)\n"


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=lambda p: " ".join(p) or "attnkit")
def test_help_shows_no_rest_markup(path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*path, "--help"])
    text = out.getvalue()
    assert text.startswith("usage:")
    for mark in ("``", ":func:`", ":class:`", ":meth:`"):
        assert mark not in text, f"{' '.join(path)} --help shows {mark}"
