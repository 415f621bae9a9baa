"""bench/_timing.py's header helpers: the commit of the scripts' checkout from any working directory."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_commit_names_the_checkout_of_the_scripts_from_another_directory(tmp_path):
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import _timing; print(_timing.commit())"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert got.stdout.strip() == head.stdout.strip() != ""


def test_machine_names_the_instruction_sets_cores_torch_and_threads(bench_script):
    _timing = bench_script("_timing")
    got = re.fullmatch(r".+ \(([a-z0-9_, ]+)\), \d+ cores, torch \S+, \d+ threads", _timing.machine())
    assert got is not None, _timing.machine()
    isa = got.group(1).split(", ")
    assert isa == ["flags unknown"] or set(isa) <= set(_timing.ISA)
