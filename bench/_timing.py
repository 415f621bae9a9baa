"""Shared timing helpers for bench/ scripts: interleaved repeats, medians, a plain table."""

from __future__ import annotations

import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

ISA = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")  # what decides which kernels run


def machine() -> str:
    """'<CPU model> (<instruction sets of ISA it has>), <cores> cores, torch <version>, <threads> threads; attnkit
    kernels: <variant> (<what forces it>)'."""
    model, flags = platform.processor() or "cpu", set()
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        flags = set(next(line.split(":", 1)[1] for line in lines if line.startswith("flags")).split())
    except (OSError, StopIteration):
        pass
    import os

    import torch

    isa = ", ".join(x for x in ISA if x in flags) or "flags unknown"
    return (f"{model} ({isa}), {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads; "
            f"{variant_note()}")


def variant_note() -> str:
    """Which variant of attnkit's native kernels runs, and the variables that force it and the peers down, as set."""
    import os

    import attnkit

    forced = [f"{k}={os.environ[k]}" for k in ("ATTNKIT_CPU_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                                "MKL_ENABLE_INSTRUCTIONS", "CT2_FORCE_CPU_ISA") if os.environ.get(k)]
    return f"attnkit kernels: {attnkit.cpu_isa()}" + (f" ({', '.join(forced)})" if forced else "")


def commit() -> str:
    """The short commit of the checkout these scripts are in (wherever they are run from), '' outside git."""
    got = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1])
    return got.stdout.strip()


def time_once(fn: Callable[[], object], iters: int) -> float:
    """Seconds per call, averaged over ``iters`` calls."""
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def interleaved_medians(fns: dict[str, Callable[[], object]], iters: int, repeats: int,
                        warmup: int = 1) -> dict[str, float]:
    """Time each function ``repeats`` times, interleaving them so load affects all alike; median s/call."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            samples[k].append(time_once(fn, iters))
    return {k: statistics.median(v) for k, v in samples.items()}


def table(header: list[str], rows: list[list[object]]) -> str:
    cells = [header] + [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])
