"""The one table of dtypes (``attnkit.inference.dtypes``): its names written as a table nowhere else in the package,
a value checked where the user gave it with an error in the user's words (``dtype=`` of the function called), the
engine's dtype chosen by ``engine_for`` alone, and the table read without torch."""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import attnkit
from attnkit.inference import BertEngine, engine_for, onednn_available, refusal
from attnkit.inference.architectures import ARCHITECTURES
from attnkit.inference.dtypes import DTYPES, ENGINES, OPTION, DType, of_torch, resolve
from attnkit.inference.select import ENGINES as ENGINE_CLASSES
from attnkit.tasks.translator import Translator
from tests.inference.test_encoder import _bert
from tests.inference.test_seq2seq import model as seq2seq_model

ROOT = Path(attnkit.__file__).parent


def _named(node: ast.AST) -> str | None:
    """The table's name an element spells: "int8" or ``torch.int8``; else None."""
    if isinstance(node, ast.Constant) and node.value in DTYPES:
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch" \
            and node.attr in DTYPES:
        return node.attr
    return None


def tables(source: str) -> list[int]:
    """Lines of the literal tables of the dtypes' names in ``source``: a tuple, list, set or dict of two or more
    elements (a dict: its keys or its values), each one of the table's names, as text or as torch's attribute
    (the kernels' own lists of float dtypes aside: a list of torch attributes counts where it holds int8)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            groups = [node.elts]
        elif isinstance(node, ast.Dict):
            groups = [[k for k in node.keys if k is not None], node.values]
        else:
            continue
        for elts in groups:
            names = [_named(e) for e in elts]
            text = any(isinstance(e, ast.Constant) for e in elts)
            if len(elts) >= 2 and None not in names and (text or "int8" in names):
                out.append(node.lineno)
                break
    return out


def rows(source: str) -> list[str]:
    """The names of the ``DType(name, ...)`` rows ``source`` makes."""
    return [c.args[0].value for c in ast.walk(ast.parse(source)) if isinstance(c, ast.Call)
            and getattr(c.func, "id", None) == "DType" and c.args and isinstance(c.args[0], ast.Constant)]


def test_the_check_finds_a_table_of_the_names():
    assert tables('CHOICES = ("float32", "bfloat16", "int8")\n') == [1]
    assert tables('D = {"float32": torch.float32, "int8": torch.int8}\n') == [1]
    assert tables("D = (torch.float32, torch.bfloat16, torch.int8)\n") == [1]
    assert tables('p.add_argument("--dtype", choices=["bfloat16", "float16"])\n') == [1]
    assert tables("KERNEL = (torch.float32, torch.bfloat16)\nNAME = 'int8'\nX = ('int8', 'uint8')\n") == []
    assert rows('R = {d.name: d for d in (DType("int8", "float32", "x"), DType("float32", "float32", "y"))}') \
        == ["int8", "float32"]


def test_the_dtype_names_are_a_table_in_one_module_only():
    """One row per name in ``dtypes.py``; anywhere else (there too) no literal list of the names."""
    found = {str(f.relative_to(ROOT)): lines for f in sorted(ROOT.rglob("*.py")) if (lines := tables(f.read_text()))}
    assert found == {}
    made = {str(f.relative_to(ROOT)): names for f in sorted(ROOT.rglob("*.py")) if (names := rows(f.read_text()))}
    assert made == {"inference/dtypes.py": list(DTYPES)}


def test_a_value_is_read_by_name_torch_dtype_or_row():
    assert resolve("int8", "f") is DTYPES["int8"] and resolve(torch.bfloat16, "f") is DTYPES["bfloat16"]
    assert resolve(torch.half, "f") is DTYPES["float16"] and resolve(DTYPES["float64"], "f") is DTYPES["float64"]
    assert of_torch(torch.int32) is None and DTYPES["int8"].torch is torch.int8
    assert DTYPES["int8"].weights is torch.float32 and DTYPES["int8"].quantized and not DTYPES["bfloat16"].quantized
    assert OPTION == tuple(n for n, d in DTYPES.items() if d.option)


@pytest.mark.parametrize("bad", ["int4", "fp8", "torch.float32", torch.int32, 8, None])
def test_a_value_not_in_the_table_is_one_line_naming_the_argument(bad):
    with pytest.raises(ValueError) as e:
        resolve(bad, "load_pretrained")
    assert str(e.value) == (f"load_pretrained: dtype={bad!r} is not one of float32, bfloat16, int8, float16, float64 "
                            "(a name, or its torch dtype)")


def test_a_loader_without_its_engine_refuses_int8_in_its_own_words():
    with pytest.raises(ValueError, match=r"^load_marian: dtype=torch.int8 runs on the inference engine only; not "
                                         r"with fast=False$"):
        resolve(torch.int8, "load_marian", fast=False)
    assert resolve("bfloat16", "load_marian", fast=False) is DTYPES["bfloat16"]


def test_load_pretrained_checks_the_value_before_reading_anything(tmp_path):
    with pytest.raises(ValueError, match=r"^load_pretrained: dtype='int4' is not one of"):
        attnkit.load_pretrained(tmp_path / "no such folder", dtype="int4")


def test_the_engine_kinds_are_the_architectures():
    assert set(ENGINES) == set(ENGINE_CLASSES) == {a.name for a in ARCHITECTURES.values()}
    assert all(set(d.engines) <= set(ENGINES) and (d.why_not != "") == (set(d.engines) != set(ENGINES))
               for d in DTYPES.values())


@pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops")
def test_engine_for_is_where_the_engines_dtype_is_chosen(caplog):
    model = _bert()
    for value in ("bfloat16", torch.bfloat16, DTYPES["bfloat16"]):
        fast = engine_for(model, dtype=value)
        assert isinstance(fast, BertEngine) and fast.dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.float32  # the model is not changed
    with pytest.raises(ValueError, match=r"^engine_for: dtype='half' is not one of float32, bfloat16"):
        engine_for(model, dtype="half")
    assert refusal(model, "float64") == DTYPES["float64"].why_not
    with caplog.at_level(logging.INFO, logger="attnkit"):
        copy = engine_for(model, dtype=torch.float64)
    assert not isinstance(copy, BertEngine) and next(copy.parameters()).dtype == torch.float64
    assert f"runs on its reference modules: {DTYPES['float64'].why_not}" in caplog.text


@pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops")
def test_a_translator_takes_its_engines_dtype_when_made():
    assert not hasattr(Translator, "engine_dtype")  # no attribute to set after construction
    model = seq2seq_model(False)
    tr = Translator(model, None, {}, dtype=DTYPES["int8"])
    assert type(tr.decoder.layers[0]).__name__ == "QuantLayer" and next(model.parameters()).dtype == torch.float32
    assert type(Translator(model, None, {}).decoder.layers[0]).__name__ == "PackedLayer"
    assert repr(DTYPES["int8"]) == "DType('int8')" and isinstance(DTYPES["int8"], DType)


def test_the_table_imports_no_torch():
    code = ("import sys\nfrom attnkit.inference.dtypes import DTYPES, OPTION\n"
            "print('torch' in sys.modules, list(OPTION))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT.parent)
    assert r.stdout.split(maxsplit=1) == ["False", "['float32', 'bfloat16', 'int8']\n"], r.stderr
