"""The README's tour runs as written, and names only commands the CLI has."""

import os
import re
import shlex
from pathlib import Path

from attnkit.cli.main import build_parser

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def run_block(code: str, where: Path) -> dict:
    """Run one README block as a fresh script would (its own namespace; files land in ``where``)."""
    scope: dict = {"__name__": "__main__"}
    cwd = os.getcwd()
    os.chdir(where)
    try:
        exec(compile(code, "README.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    return scope


def test_every_python_block_runs(tmp_path):
    """Each block runs as written, in a fresh namespace; the tour's and the pretrained block's values hold."""
    from attnkit.viz import read_attention_html

    assert len(BLOCKS) >= 2
    scopes = []
    for i, code in enumerate(BLOCKS):
        (tmp_path / str(i)).mkdir()
        scopes.append(run_block(code, tmp_path / str(i)))
    tour = scopes[0]
    assert tour["out"].shape == (2, 8, 10, 16) and tour["w"].shape == (2, 8, 10, 10)
    assert sum(p.numel() for p in tour["model"].parameters()) == 44_138_496
    i = next(i for i, b in enumerate(BLOCKS) if "load_pretrained" in b)
    assert "import attnkit\n" in BLOCKS[i] and "attnkit.viz" in BLOCKS[i] and "from attnkit" not in BLOCKS[i]
    assert tuple(scopes[i]["vectors"].shape) == (2, 384)
    page = read_attention_html(tmp_path / str(i) / "page.html")  # attnkit.viz worked after `import attnkit`
    assert page["queries"] == scopes[i]["att"].tokens and len(page["layer_names"]) == 6


def test_attnkit_viz_needs_no_import_of_its_own():
    """``attnkit.viz`` (and the other outer packages) resolve through ``attnkit.__getattr__`` even when
    nothing imported them yet, as in a fresh interpreter running the README's block."""
    import sys

    import attnkit

    for name in ("viz", "nn", "pretrained", "train"):
        assert attnkit.__getattr__(name) is sys.modules[f"attnkit.{name}"]


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
