"""``attnkit info``: what runs here: versions, the CPU's instruction sets, the native kernels' variant.

    attnkit info            # builds the selected variant if it is not built yet (about a minute, said)
    ATTNKIT_CPU_ISA=avx2 attnkit info
"""

from __future__ import annotations

import argparse
import platform


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="versions, the CPU's instruction sets and the native kernels' variant that runs",
                       description="Print attnkit's, torch's and Python's versions, the CPU's instruction sets, the "
                                   "native kernels' variants this CPU can run, the one that runs (ATTNKIT_CPU_ISA "
                                   "forces a lower one: docs/cpu.md) and the attention backends' availability.")
    p.add_argument("--no-build", action="store_true",
                   help="do not build the kernels: say which variant would run (default: build it and say which runs)")
    p.set_defaults(func=run)


def lines(build: bool = True) -> list[str]:
    import torch

    from .. import __version__
    from ..functional import native
    from ..functional.native import isa

    chosen = isa.selected()  # raises CpuIsaError (a ValueError: one line) for a bad ATTNKIT_CPU_ISA
    out = [f"attnkit {__version__}, torch {torch.__version__}, Python {platform.python_version()}",
           f"CPU: {platform.machine()}, {torch.get_num_threads()} threads; torch kernels: "
           f"{torch.backends.cpu.get_cpu_capability()}",
           f"native variants this CPU runs: {', '.join(isa.supported())}"
           + (f" (extras: {', '.join(isa.extras())})" if isa.extras() else ""),
           f"selected: {chosen}" + (f" (forced by {isa.ENV})" if isa.requested() else " (the best this CPU runs)")]
    if build:
        runs = native.cpu_isa()
        out.append(f"runs: {runs}" if runs == chosen else
                   f"runs: {runs or 'none, the PyTorch paths'} ({native.unavailable() or 'a lower variant'})")
        if runs is not None:
            fast = native.kernel().cpu_has_fast_dot()
            out.append("int8 products: attnkit's kernels, " + ("the CPU's int8 dot products (AVX512-VNNI, NEON's sdot)"
                                                               if fast else f"the {runs} variant's own"))
    return out


def run(args: argparse.Namespace) -> int:
    print("\n".join(lines(build=not args.no_build)))
    return 0
