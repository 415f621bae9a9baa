"""A fast start: ``attnkit --help`` and the ``--help`` of commands parse without importing torch, in well under a
second; a mistyped command gets a suggestion; help shows no reST markup."""

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

# Commands whose --help needs no torch. The others still import it to build their options: train, evaluate
# (the task modules and their models' configs), experiment (the experiments' configs).
WITHOUT_TORCH = [(), ("demo",), ("lecture",), ("embed",), ("similarity",), ("attend",), ("predict",), ("translate",),
                 ("export",), ("positions",), ("complexity",), ("transcribe",), ("asr",), ("asr", "generate"),
                 ("lra",), ("lra", "run"), ("lra", "cell"), ("lra", "generate", "pathfinder")]

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


def _help_in_a_child(path: tuple[str, ...]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", CHILD, *path], capture_output=True, text=True, env=env, timeout=60,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("path", WITHOUT_TORCH, ids=lambda p: " ".join(p) or "attnkit")
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
