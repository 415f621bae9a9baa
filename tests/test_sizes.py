"""CONTRIBUTING's sizes, read from the source: every file of the package (Python, the native C++ and the pages'
scripts and styles) at most ``MAX_FILE_LINES`` lines, every Python function (methods and nested functions
included, from its ``def`` line to its last) at most ``MAX_FUNCTION_LINES``."""

from __future__ import annotations

import ast
from pathlib import Path

import attnkit

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
SOURCES = (".py", ".h", ".cpp", ".js", ".css")


def oversized(root: Path) -> list[str]:
    """``path: N lines`` for each file over the limit, ``path:line name(): N lines`` for each function over it."""
    out = []
    for f in sorted(p for p in root.rglob("*") if p.suffix in SOURCES and "__pycache__" not in p.parts):
        text = f.read_text(encoding="utf-8")
        name = f.relative_to(root.parent).as_posix()
        if len(text.splitlines()) > MAX_FILE_LINES:
            out.append(f"{name}: {len(text.splitlines())} lines (at most {MAX_FILE_LINES})")
        if f.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(text, filename=str(f))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(f"{name}:{node.lineno} {node.name}(): {n} lines (at most {MAX_FUNCTION_LINES})")
    return out


def test_every_file_and_function_of_the_package_is_within_the_limits():
    assert oversized(Path(attnkit.__file__).parent) == []


def test_the_check_finds_a_long_file_and_a_long_function(tmp_path):
    root = tmp_path / "attnkit"
    (root / "sub").mkdir(parents=True)
    lines = [f"x{i} = {i}" for i in range(60)]
    (root / "sub" / "a.py").write_text("def ok():\n" + "".join(f"    {x}\n" for x in lines[:59])  # 60 lines
                                       + "\n\nclass C:\n    def long(self):\n"  # line 64: 61 lines
                                       + "".join(f"        {x}\n" for x in lines))
    (root / "sub" / "b.h").write_text("// x\n" * 401)
    (root / "c.js").write_text("x;\n" * 400)  # at the limit: fine
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "d.py").write_text("x = 1\n" * 500)
    assert oversized(root) == ["attnkit/sub/a.py:64 long(): 61 lines (at most 60)",
                               "attnkit/sub/b.h: 401 lines (at most 400)"]
