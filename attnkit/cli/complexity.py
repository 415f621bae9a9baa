"""``attnkit complexity --out DIR``: what attention costs on this machine, beside the lecture's table.

Times and peak memory of a convolution, a GRU, full self-attention, window attention and linear
attention of the same width against the sequence length, with the fitted exponent of each curve
(``attnkit.viz.complexity``). The machine should be quiet: timings are medians, but other work shows.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from ..nn.limits import check_memory, ints
from .options import THREADS

LENGTH = ints(1, 2**20)


def _lengths(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--lengths: comma-separated integers expected, got {text!r}") from None
    if len(values) < 3 or not all(LENGTH.contains(v) for v in values):
        raise argparse.ArgumentTypeError(f"--lengths: three or more lengths, each {LENGTH.text()}, got {text!r}")
    return values


def run(args) -> int:
    import torch

    from ..viz.complexity import complexity_report

    n = max(args.lengths)  # full attention's scores and weights at the longest length, and their copies
    check_memory(4 * 4 * args.heads * n * n, f"complexity: full attention at length {n} with {args.heads} heads")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"measuring on {platform.processor() or platform.machine()}, {args.threads} torch thread(s), "
          f"d = {args.dim}, lengths {args.lengths}")
    res = complexity_report(args.out, args.lengths, d=args.dim, heads=args.heads, kernel=args.kernel,
                            window=args.window, repeats=args.repeats, log=print)
    print()
    print(res["table"])
    print()
    for r in res["rows"]:
        print(f"{r['row'].layer:>16}: time grows like n^{r['time_exp']:.2f}, memory like n^{r['mem_exp']:.2f} "
              f"(the lecture: {r['row'].per_layer})")
    print(f"wrote {res['figure']} and {res['markdown']}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("complexity", help="measure time and memory of convolution, GRU and three attentions "
                                          "against sequence length, beside the lecture's table")
    p.add_argument("--out", type=Path, default=Path("runs/complexity"),
                   help="folder for complexity.png and complexity.md (default runs/complexity)")
    p.add_argument("--lengths", type=_lengths, default=[256, 512, 1024, 2048, 4096],
                   help="comma-separated sequence lengths, three or more (default 256,512,1024,2048,4096)")
    p.add_argument("--dim", type=ints(1, 4096), default=64, help="width d of every layer (default 64)")
    p.add_argument("--heads", type=ints(1, 1024), default=4, help="attention heads (default 4)")
    p.add_argument("--kernel", type=ints(1, 1024), default=3, help="convolution kernel size k (default 3)")
    p.add_argument("--window", type=ints(0, 65536), default=16,
                   help="window attention: keys on each side (default 16)")
    p.add_argument("--repeats", type=ints(1, 1000), default=5,
                   help="timed forward passes per point, median (default 5)")
    p.add_argument("--threads", type=THREADS, default=1, help="torch threads (0: torch's choice; default 1)")
    p.set_defaults(func=run)
