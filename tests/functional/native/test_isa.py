"""isa.py: what the CPU runs, the variant picked, ATTNKIT_CPU_ISA, and `attnkit info`."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from attnkit.cli.main import main
from attnkit.functional import native
from attnkit.functional.native import isa

AVX2_ONLY = frozenset({"sse2", "avx", "avx2", "fma"})
AVX512 = AVX2_ONLY | {"avx512f", "avx512dq", "avx512vl", "avx512bw", "avx512_bf16"}


@pytest.fixture
def cpu(monkeypatch):
    """cpu(flags, machine): pretend to be another CPU (isa's answers only; nothing is built)."""

    def pretend(flags, machine="x86_64"):
        monkeypatch.setattr(isa, "cpu_features", lambda: frozenset(flags))
        monkeypatch.setattr(isa, "machine", lambda: machine)

    monkeypatch.delenv(isa.ENV, raising=False)
    return pretend


def test_the_best_variant_the_cpu_runs_is_selected(cpu):
    cpu(AVX512)
    assert isa.supported() == ("avx512", "avx2", "generic") and isa.selected() == "avx512"
    assert isa.extras() == ("avx512_bf16",) and isa.lower("avx512") == "avx2" and isa.lower("generic") is None
    cpu(AVX2_ONLY)
    assert isa.supported() == ("avx2", "generic") and isa.selected() == "avx2"
    cpu({"avx2"})  # AVX2 without FMA: the generic variant
    assert isa.supported() == ("generic",)
    cpu({"fp", "asimd"}, "aarch64")
    assert isa.supported() == ("neon", "generic")
    cpu(set(), "riscv64")
    assert isa.supported() == ("generic",)


def test_a_forced_variant_runs_or_fails_with_one_line(cpu, monkeypatch):
    cpu(AVX2_ONLY)
    monkeypatch.setenv(isa.ENV, "generic")
    assert isa.selected() == "generic"
    monkeypatch.setenv(isa.ENV, " AVX2 ")
    assert isa.selected() == "avx2"
    monkeypatch.setenv(isa.ENV, "avx512")
    with pytest.raises(isa.CpuIsaError, match=r"^ATTNKIT_CPU_ISA=avx512: this CPU cannot run it \(it runs avx2, "
                                              r"generic\)$"):
        isa.selected()
    monkeypatch.setenv(isa.ENV, "sse5")
    with pytest.raises(isa.CpuIsaError, match="ATTNKIT_CPU_ISA=sse5: no such variant"):
        isa.selected()
    monkeypatch.setenv(isa.ENV, "")
    assert isa.selected() == "avx2"  # empty: unset


def test_the_real_cpu_reads_flags_from_proc_cpuinfo_not_torchs_capability():
    """/proc/cpuinfo, so that ATEN_CPU_CAPABILITY (which forces torch down) does not move attnkit's variant."""
    code = "from attnkit.functional.native import isa; print(','.join(isa.supported()))"
    same = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "ATEN_CPU_CAPABILITY": "default"})
    assert same.returncode == 0, same.stderr
    assert same.stdout.strip() == ",".join(isa.supported())
    assert isa.supported()[-1] == "generic"


@pytest.mark.parametrize("variant", isa.supported())
def test_each_variant_builds_in_its_own_namespace_and_loads_beside_the_others(variant):
    """Every variant the CPU runs loads in this one process (the kernels' tests compare each with the references);
    each reports its own bfloat16 support (AVX512-BF16 instructions are the AVX-512 variant's only)."""
    k = native.kernel(variant)
    assert k is not None and native.cpu_isa(variant) == variant
    assert k.__name__.startswith(f"attnkit_native_{variant}_")
    if variant != "avx512":
        assert not k.cpu_has_bf16()
    x, r = torch.randn(3, 32), torch.randn(3, 32)
    w, b = torch.randn(32), torch.randn(32)
    torch.testing.assert_close(k.add_norm(x, r, w, b, 1e-5),
                               torch.nn.functional.layer_norm(x + r, (32,), w, b, 1e-5), atol=1e-5, rtol=1e-5)


def test_attnkit_info_says_what_runs_and_refuses_a_variant_the_cpu_lacks(capsys, monkeypatch):
    monkeypatch.delenv(isa.ENV, raising=False)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"native variants this CPU runs: {', '.join(isa.supported())}" in out
    assert f"runs: {isa.supported()[0]}" in out
    assert "int8 products: attnkit's kernels, " in out
    monkeypatch.setenv(isa.ENV, "generic")
    assert main(["info", "--no-build"]) == 0
    assert "selected: generic (forced by ATTNKIT_CPU_ISA)" in capsys.readouterr().out
    lacking = "neon" if isa.machine() == "x86_64" else "avx2"
    monkeypatch.setenv(isa.ENV, lacking)
    assert main(["info"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"attnkit: error: ATTNKIT_CPU_ISA={lacking}: this CPU cannot run it (it runs " \
                  f"{', '.join(isa.supported())})"
