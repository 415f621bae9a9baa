"""The README's tour runs as written, and names only commands the CLI has."""

import re
import shlex
from pathlib import Path

from attnkit.cli.main import build_parser

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_tour_runs():
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["out"].shape == (2, 8, 10, 16) and scope["w"].shape == (2, 8, 10, 10)
    assert sum(p.numel() for p in scope["model"].parameters()) == 44_138_496


def test_readme_commands_exist():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    named = set(re.findall(r"^[ \t]+attnkit (\w+)", README, re.M)) | set(re.findall(r"`attnkit (\w+)", README))
    assert named and named <= set(sub.choices), named - set(sub.choices)
    assert "make demo" in README and "make test" in README


def test_readme_command_lines_parse():
    """Every indented ``attnkit ...`` line of the README parses with the real CLI (options included)."""
    parser = build_parser()
    lines = re.findall(r"^[ \t]+attnkit (.+)$", README, re.M)
    assert len(lines) >= 10
    for line in lines:
        argv = shlex.split(line.split("  #")[0])
        try:
            parser.parse_args(argv)
        except SystemExit as e:
            raise AssertionError(f"README line does not parse: attnkit {line}") from e
