"""The package's imports, read from the source (function-level imports count, ``if TYPE_CHECKING:`` ones do not):
no import cycle, the layers in CONTRIBUTING's order, nothing from ``generation`` into ``viz`` and no private
``viz`` helper used outside ``viz``. A module importing its own ancestor package (a submodule reading its
package's registry) is not an edge."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import attnkit

# CONTRIBUTING: cli -> (tasks, lra, experiments) -> (train, data, viz, pretrained, generation) -> inference
# -> models -> nn -> functional; the top-level modules by who may import them.
RANK = {"functional": 0, "masks": 0, "lazy": 0, "nn": 1, "models": 2, "inference": 3, "train": 4, "data": 4, "viz": 4,
        "pretrained": 4, "generation": 4, "outputs": 4, "load": 5, "tasks": 5, "lra": 5, "experiments": 5, "cli": 6}


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the package folder ``root``."""
    out = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _imported(module: str, is_package: bool, node: ast.AST) -> list[tuple[str, str]]:
    """(dotted target, imported name or "") of one import statement in ``module``."""
    if isinstance(node, ast.Import):
        return [(a.name, "") for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    target = node.module or ""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([target] if target else []))
    return [(target, a.name) for a in node.names]


def imports(mods: dict[str, Path]) -> dict[str, set[tuple[str, str]]]:
    """Module -> the (module of ``mods`` it imports, name) pairs, function-level included, TYPE_CHECKING not."""
    out = {}
    for m, f in mods.items():
        tree = ast.parse(f.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                       for b in node.body for n in ast.walk(b)}
        edges = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            for target, name in _imported(m, f.name == "__init__.py", node):
                t = f"{target}.{name}" if f"{target}.{name}" in mods else target
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m and not m.startswith(t + "."):
                    edges.add((t, name))
        out[m] = edges
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def problems(root: Path) -> list[str]:
    """Every cycle, import against the layer order, generation -> viz import and private viz import."""
    mods = modules(root)
    found = imports(mods)
    out = [" <-> ".join(c) for c in cycles({m: {t for t, _ in e} for m, e in found.items()})]
    pkg = root.name
    for m, edges in sorted(found.items()):
        top = m.split(".")[1] if "." in m else ""
        for t, name in sorted(edges):
            dst = t.split(".")[1] if "." in t else ""
            if top in RANK and dst in RANK and RANK[dst] > RANK[top]:
                out.append(f"{m} imports {t} against the layer order")
            if top == "generation" and dst == "viz":
                out.append(f"{m} imports {t}")
            if dst == "viz" and top != "viz" and (name.startswith("_") or any(
                    p.startswith("_") for p in t.split(".")[2:])):
                out.append(f"{m} imports private {t}.{name}")
    return [p for p in out if p.startswith(pkg)]


def test_the_package_has_no_import_cycle_and_its_layers_import_one_way():
    assert problems(Path(attnkit.__file__).parent) == []


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / "attnkit"


@pytest.mark.parametrize(("files", "expected"), [
    ({"attnkit/__init__.py": "", "attnkit/tasks/__init__.py": "", "attnkit/tasks/a.py": "from .b import x\n",
      "attnkit/tasks/b.py": "def f():\n    from . import a\n"}, ["attnkit.tasks.a <-> attnkit.tasks.b"]),
    ({"attnkit/__init__.py": "", "attnkit/nn/__init__.py": "def f():\n    from ..models import m\n",
      "attnkit/models/__init__.py": "", "attnkit/models/m.py": ""},
     ["attnkit.nn imports attnkit.models.m against the layer order"]),
    ({"attnkit/__init__.py": "", "attnkit/viz/__init__.py": "", "attnkit/viz/heat.py": "_grid = 1\n",
      "attnkit/generation/__init__.py": "from ..viz.heat import _grid\n"},
     ["attnkit.generation imports attnkit.viz.heat", "attnkit.generation imports private attnkit.viz.heat._grid"]),
    ({"attnkit/__init__.py": "", "attnkit/nn/__init__.py": "from .reg import R\n",  # a registry read back
      "attnkit/nn/reg.py": "R = {}\ndef f():\n    from . import R\n",
      "attnkit/tasks/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..cli import c\n",
      "attnkit/cli/__init__.py": "", "attnkit/cli/c.py": "from ..tasks import x\n"}, []),
])
def test_the_check_finds_function_level_cycles_and_wrong_way_imports(tmp_path, files, expected):
    assert problems(_write(tmp_path, files)) == expected
