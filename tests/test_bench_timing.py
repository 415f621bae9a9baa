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


def test_machine_names_the_instruction_sets_cores_torch_threads_and_the_kernels_variant(bench_script, monkeypatch):
    import attnkit

    _timing = bench_script("_timing")
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    monkeypatch.setenv("CT2_FORCE_CPU_ISA", "AVX2")
    got = re.fullmatch(r".+ \(([a-z0-9_, ]+)\), \d+ cores, torch \S+, \d+ threads; attnkit kernels: (\w+)(.*)",
                       _timing.machine())
    assert got is not None, _timing.machine()
    assert got.group(2) == attnkit.cpu_isa() and "CT2_FORCE_CPU_ISA=AVX2" in got.group(3)
    isa = got.group(1).split(", ")
    assert isa == ["flags unknown"] or set(isa) <= set(_timing.ISA)
