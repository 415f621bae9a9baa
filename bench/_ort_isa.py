"""ONNX Runtime as it runs on a CPU without AVX-512: a copy whose XGETBV reads report no AVX-512 state.

MLAS (and the cpuinfo library linked into ONNX Runtime) choose their kernels from CPUID and from XCR0, the register
``xgetbv`` reads, in which the operating system says which vector state it saves. On a CPU with AVX-512 but an XCR0
without the AVX-512 bits (5-7), every check for AVX-512 (and so AVX512-VNNI and AMX) fails and ONNX Runtime takes the
kernels it takes on an AVX2 CPU (AVX2 and FMA; AVX-VNNI only where CPUID reports it). ONNX Runtime has no switch for
this (CTranslate2 has ``CT2_FORCE_CPU_ISA``, oneDNN ``ONEDNN_MAX_CPU_ISA``, PyTorch ``ATEN_CPU_CAPABILITY``), and
CPUID faulting (``arch_prctl(ARCH_SET_CPUID)``) is not available in every VM, so ``cap_avx2`` copies the installed
``onnxruntime`` package into a directory and, in the copy of its Python extension only, replaces each ``xgetbv``
(``0f 01 d0``, found with ``objdump -d``) by ``push 7; pop rax`` (``6a 07 58``): XCR0 = x87 | SSE | AVX. The
installed package is not touched. Put the returned directory first on ``sys.path`` before ``import onnxruntime``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

XGETBV = bytes.fromhex("0f01d0")
XCR0_AVX2 = bytes.fromhex("6a0758")  # push 7; pop rax: XCR0 = x87 | SSE | AVX (no opmask / ZMM / AMX state)


def _text_section(so: Path) -> tuple[int, int, int]:
    """(virtual address, file offset, size) of the .text section of ``so``, from ``objdump -h``."""
    out = subprocess.run(["objdump", "-h", str(so)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1] == ".text":
            return int(f[3], 16), int(f[5], 16), int(f[2], 16)
    raise RuntimeError(f"{so}: no .text section in objdump -h")


def _xgetbv_offsets(so: Path) -> list[int]:
    """File offsets of every ``xgetbv`` instruction that ``objdump -d`` decodes in ``so``'s .text."""
    vma, off, size = _text_section(so)
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", str(so)],
                         capture_output=True, text=True, check=True).stdout
    addrs = [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):\s+xgetbv\b", out, re.M)]
    if not all(vma <= a < vma + size for a in addrs):
        raise RuntimeError(f"{so}: an xgetbv outside .text")
    return [a - vma + off for a in addrs]


def cap_avx2(dest: Path) -> tuple[Path, int]:
    """Copy ``onnxruntime`` into ``dest`` with its extension's XCR0 reads capped at AVX: (directory for sys.path,
    number of ``xgetbv`` patched). Raises if objdump is missing, the package is already imported, or nothing is
    found to patch."""
    import importlib.util
    import sys

    if "onnxruntime" in sys.modules:
        raise RuntimeError("cap_avx2: onnxruntime is already imported in this process")
    if shutil.which("objdump") is None:
        raise RuntimeError("cap_avx2 needs objdump (binutils) to find the xgetbv instructions")
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or spec.origin is None:
        raise RuntimeError("cap_avx2: onnxruntime is not installed")
    src = Path(spec.origin).parent
    shutil.copytree(src, dest / "onnxruntime")
    exts = sorted((dest / "onnxruntime" / "capi").glob("onnxruntime_pybind11_state*.so"))
    if len(exts) != 1:
        raise RuntimeError(f"cap_avx2: expected one onnxruntime_pybind11_state*.so, found {len(exts)}")
    data = bytearray(exts[0].read_bytes())
    offsets = _xgetbv_offsets(exts[0])
    if not offsets:
        raise RuntimeError(f"{exts[0]}: no xgetbv found; this onnxruntime cannot be capped this way")
    for o in offsets:
        if data[o:o + 3] != XGETBV:
            raise RuntimeError(f"{exts[0]}: no xgetbv at file offset {o:#x}")
        data[o:o + 3] = XCR0_AVX2
    exts[0].write_bytes(bytes(data))
    return dest, len(offsets)
