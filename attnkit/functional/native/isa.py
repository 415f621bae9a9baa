"""What this CPU runs: the one place that knows the instruction sets and picks the native kernels' variant.

The kernels are one C++ source over a portable vector layer (``csrc/vec.h``), compiled once per variant:

=========  ==============================================  ===========================================
variant    compiler flags                                  runs on
=========  ==============================================  ===========================================
avx512     -mavx512f -mavx512dq -mavx512vl -mavx512bw      x86-64 with AVX-512 F/DQ/VL/BW (bfloat16 products
           -mfma                                           and int8 dot products where the CPU has
                                                           AVX512-BF16 / VNNI, checked at run time)
avx2       -mavx2 -mfma                                    x86-64 with AVX2 and FMA
neon       (none: NEON is aarch64's baseline)              aarch64 (int8 dot products, sdot, where the CPU has
                                                           them, checked at run time)
generic    (none)                                          any CPU (the compiler vectorises what it can)
=========  ==============================================  ===========================================

``selected()`` is the best variant this CPU runs, or the one ``ATTNKIT_CPU_ISA`` names (as CTranslate2's
``CT2_FORCE_CPU_ISA``): a variant the CPU lacks, or an unknown name, raises ``CpuIsaError`` with one line that
names it and what the CPU runs. ``attnkit info`` prints the lot.
"""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

__all__ = ["VARIANTS", "FLAGS", "CpuIsaError", "cpu_features", "supported", "selected", "requested", "ENV"]

ENV = "ATTNKIT_CPU_ISA"
# Best first, per machine architecture.
VARIANTS = {"x86_64": ("avx512", "avx2", "generic"), "aarch64": ("neon", "generic")}
FLAGS = {
    "avx512": ("-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma"),
    "avx2": ("-mavx2", "-mfma"),
    "neon": (),
    "generic": (),
}
# The CPU features (as Linux's /proc/cpuinfo names them) each variant needs.
NEEDS = {
    "avx512": {"avx512f", "avx512dq", "avx512vl", "avx512bw", "fma"},
    "avx2": {"avx2", "fma"},
    "neon": {"asimd"},
    "generic": set(),
}
# Extras reported beside the variant: what code beyond a variant's flags checks again at run time (AVX512-BF16's
# products, AVX512-VNNI's int8 dot products; NEON's int8 dot products, asimddp).
EXTRAS = ("avx512_bf16", "avx512_vnni", "avx_vnni", "asimddp")


class CpuIsaError(ValueError):
    """ATTNKIT_CPU_ISA names a variant that is unknown or that this CPU cannot run."""


def machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


@functools.cache
def cpu_features() -> frozenset[str]:
    """The CPU's feature flags: Linux's /proc/cpuinfo ``flags`` (x86) or ``Features`` (arm) line, else what
    torch reports (its own kernels' level: AVX512 / AVX2 / NEON), so the answer never depends on a variable
    that forces torch down (ATEN_CPU_CAPABILITY) where /proc/cpuinfo exists."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                return frozenset(value.split())
    except OSError:
        pass
    try:
        import torch

        cap = torch.backends.cpu.get_cpu_capability().upper()
    except Exception:  # noqa: BLE001 - nothing known: the generic variant only
        return frozenset()
    known = {"AVX512": NEEDS["avx512"] | NEEDS["avx2"], "AVX2": NEEDS["avx2"], "NEON": {"asimd"}}
    return frozenset(next((v for k, v in known.items() if cap.startswith(k)), set()))


def supported() -> tuple[str, ...]:
    """The variants this CPU runs, best first (``generic`` always last)."""
    have = cpu_features()
    return tuple(v for v in VARIANTS.get(machine(), ("generic",)) if NEEDS[v] <= have)


def requested() -> str | None:
    """The variant ``ATTNKIT_CPU_ISA`` forces, checked against this CPU, or None when it is unset or empty."""
    name = os.environ.get(ENV, "").strip().lower()
    if not name:
        return None
    runs = supported()
    if name not in FLAGS:
        raise CpuIsaError(f"{ENV}={name}: no such variant (choose from {', '.join(runs)})")
    if name not in runs:
        raise CpuIsaError(f"{ENV}={name}: this CPU cannot run it (it runs {', '.join(runs)})")
    return name


def selected() -> str:
    """The variant the native kernels use: ``ATTNKIT_CPU_ISA``'s, else the best this CPU runs."""
    return requested() or supported()[0]


def extras() -> tuple[str, ...]:
    """The run-time extras this CPU has (AVX512-BF16, VNNI, NEON's dot products), as /proc/cpuinfo names them."""
    have = cpu_features()
    return tuple(x for x in EXTRAS if x in have)


def lower(variant: str) -> str | None:
    """The next variant down from ``variant`` that this CPU runs, or None below generic."""
    runs = supported()
    return runs[runs.index(variant) + 1] if variant in runs and runs.index(variant) + 1 < len(runs) else None
