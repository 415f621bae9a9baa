"""The kernels' cores (``kernel_check.cpp``, no torch) built per variant and run against plain loops: every x86
variant this CPU runs, and the NEON variant with Debian's aarch64 cross compiler, run under qemu-user where they
are installed (``.ci/run`` installs both). Each skips, saying why, where its tools are missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from attnkit.functional import native
from attnkit.functional.native import isa

CHECK = Path(__file__).with_name("kernel_check.cpp")
CROSS, QEMU = "aarch64-linux-gnu-g++", "qemu-aarch64"


def build(compiler: str, variant: str, out: Path, extra: tuple[str, ...] = ()) -> None:
    cmd = [compiler, "-O2", "-std=c++17", *isa.FLAGS[variant], f"-DATTNKIT_VARIANT=attnkit_{variant}",
           f"-I{native.CSRC}", *extra, str(CHECK), "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def check_output(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == ["add_norm", "small_linear", "panel_sums", "int8_quant", "int8_sums", "int8_fast", "short",
                     "window", "exp"]
    assert "FAILED" not in done.stdout


@pytest.mark.parametrize("variant", [v for v in isa.supported() if v != "neon"])
def test_the_cores_of_each_variant_this_cpu_runs(variant, tmp_path):
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None or isa.machine() != "x86_64":
        pytest.skip("needs a C++ compiler on x86-64")
    build(compiler, variant, tmp_path / "check")
    check_output(subprocess.run([str(tmp_path / "check")], capture_output=True, text=True, timeout=120))


def test_the_neon_variant_compiles_and_runs_under_qemu(tmp_path):
    if shutil.which(CROSS) is None:
        pytest.skip(f"{CROSS} is not installed (Debian: apt-get install g++-aarch64-linux-gnu)")
    build(CROSS, "neon", tmp_path / "check", ("-static",))
    if shutil.which(QEMU) is None:
        pytest.skip(f"compiled; {QEMU} is not installed to run it (Debian: apt-get install qemu-user)")
    check_output(subprocess.run([QEMU, str(tmp_path / "check")], capture_output=True, text=True, timeout=300))
