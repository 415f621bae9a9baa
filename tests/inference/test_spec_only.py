"""The engines know a model only through its weight spec: no file under ``attnkit/inference`` but the spec's own
mapping (``architectures.py``) reads a model's attributes (modules, buffers, config, private methods) or imports a
model class. An engine may hand a call it does not run (attention weights, gradients) to its reference model whole:
``self.reference.decode_step(...)`` inside its own ``decode_step``, and nothing else of the model."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import torch

import attnkit

INFERENCE = Path(attnkit.__file__).parent / "inference"
SPEC_READER = "architectures.py"  # the one table from a model's names to the spec's
MODEL_NAMES = ("model", "reference")  # parameters that hold a model (not those annotated bool: a flag)


def _model_params(fn: ast.FunctionDef) -> set[str]:
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return {a.arg for a in args if a.arg in MODEL_NAMES and "bool" not in ast.unparse(a.annotation or ast.Name(""))}


class _Reads(ast.NodeVisitor):
    """Collects the reads of a model's attributes in one module (see ``reads``)."""

    def __init__(self):
        self.found: list[str] = []
        self.held: set[str] = set()  # self.<attribute> holding a model, in the class being read
        self.names: list[set[str]] = []  # per function: the local names holding a model
        self.method: list[str] = []

    def is_model(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return bool(self.names) and node.id in self.names[-1]
        return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                and node.attr in self.held)

    def visit_ClassDef(self, node: ast.ClassDef):
        outer, self.held = self.held, set()
        for fn in (n for n in ast.walk(node) if isinstance(n, ast.FunctionDef)):
            params = _model_params(fn)
            for a in (n for n in ast.walk(fn) if isinstance(n, ast.Assign)):
                values = a.value.elts if isinstance(a.value, ast.Tuple) else [a.value]
                targets = a.targets[0].elts if isinstance(a.targets[0], ast.Tuple) else a.targets
                for t, v in zip(targets, values):
                    if isinstance(t, ast.Attribute) and isinstance(v, ast.Name) and v.id in params:
                        self.held.add(t.attr)
        self.generic_visit(node)
        self.held = outer

    def visit_FunctionDef(self, node: ast.FunctionDef):
        self.names.append(_model_params(node))
        self.method.append(node.name)
        self.generic_visit(node)
        self.names.pop()
        self.method.pop()

    def visit_Assign(self, node: ast.Assign):  # an alias: ref = self.reference
        if self.names and self.is_model(node.value):
            self.names[-1] |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and self.is_model(f.value) and self.method and f.attr == self.method[-1]:
            for part in [*node.args, *node.keywords]:  # the call handed over whole: only its arguments are read
                self.visit(part)
            return
        if isinstance(f, ast.Name) and f.id == "getattr" and node.args and self.is_model(node.args[0]):
            self.found.append(f"line {node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        if self.is_model(node.value):
            self.found.append(f"line {node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)


def reads(source: str) -> list[str]:
    """Where ``source`` reads an attribute of a model: of a parameter ``model`` / ``reference``, of an attribute
    of ``self`` that holds one, or of a local name that does; a call of a model's method of the same name as the
    method it is in (the whole call handed over) is not a read."""
    visitor = _Reads()
    visitor.visit(ast.parse(source))
    return visitor.found


def model_classes(source: str, module: str) -> list[str]:
    """The ``torch.nn.Module`` classes of ``attnkit.models`` that ``source``, the module named ``module``
    (``attnkit.inference.asr``), imports."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = module.split(".")[:-node.level] if node.level else []
        target = ".".join(base + ([node.module] if node.module else []))
        if target.startswith("attnkit.models."):
            found = importlib.import_module(target)
            out += [a.name for a in node.names if isinstance(getattr(found, a.name, None), type)
                    and issubclass(getattr(found, a.name), torch.nn.Module)]
    return out


SAMPLE = '''
class Engine:
    def __init__(self, spec, model, reference: bool = False):
        self.model_ref, self.flag, self.config = model, reference, model.config
        self.norm = self.model_ref.ctc_norm

    def encode(self, ids):
        self.model_ref._check_ids(ids)
        ref = self.model_ref
        mask = ref.encoder_mask(ids)
        return self.model_ref.encode(ids, self.flag.real)

    def decode(self, x):
        return self.model_ref.encode(x)


def pick(model):
    return getattr(model, "config"), model.parameters(), spec_of(model)
'''


def test_the_check_finds_each_read_of_a_model():
    assert reads(SAMPLE) == ["line 4: model.config", "line 5: self.model_ref.ctc_norm",
                             "line 8: self.model_ref._check_ids", "line 10: ref.encoder_mask",
                             "line 14: self.model_ref.encode", "line 18: getattr(model, 'config')",
                             "line 18: model.parameters"]
    assert model_classes("from ..models.asr import AsrModel, Encoded\n", "attnkit.inference.asr") == ["AsrModel"]
    assert model_classes("from ...models.nat import NATModel, row_lengths_for\n", "attnkit.inference.native.x") \
        == ["NATModel"]


def test_no_engine_reads_a_model_but_through_its_spec():
    found = {}
    for f in sorted(INFERENCE.rglob("*.py")):
        if f.name != SPEC_READER:
            text = f.read_text()
            module = ".".join(("attnkit", *f.relative_to(INFERENCE.parent).with_suffix("").parts))
            problems = reads(text) + [f"imports the model class {c}" for c in model_classes(text, module)]
            if problems:
                found[str(f.relative_to(INFERENCE))] = problems
    assert found == {}
    assert reads((INFERENCE / SPEC_READER).read_text())  # the spec's mapping does read models: the check sees it
