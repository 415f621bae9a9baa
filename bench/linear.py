"""A sentence's linear layers: attnkit's native kernel for a few rows against oneDNN, float32 and bfloat16.

    flock /tmp/attnkit-heavy.lock .venv/bin/python bench/linear.py [--threads 2] [--rows 1 4 13 32]
        [--shapes 256x768 256x1024 1024x256 256x8000] [--repeats 15]

The native kernel ``PackedLinear`` runs for a few rows (x W^T + b: W blocked up to 4 rows, in panels of 16
columns from 5; bfloat16 panels take AVX512-BF16's dot products of pairs), called directly at any number of
rows, against oneDNN on the same pre-packed weights (``torch.ops.mkldnn._linear_pointwise``, what
``PackedLinear`` runs past ``PANEL_ROWS``): the measurement that sets that threshold. The shapes of the NAT
benchmark's model (d 256, FFN 1,024, 8,000 words) by default. The weights stay in cache (one layer timed over and
over): the kernels' own rate. Interleaved, medians.
"""

from __future__ import annotations

import argparse
import datetime

import torch
from _timing import commit, interleaved_medians, machine, table
from torch import nn

from attnkit.inference import PackedLinear


def native(packed: PackedLinear, x: torch.Tensor) -> torch.Tensor:
    """The native kernel on x (M, K) at any M, W in the layout ``PackedLinear`` gives it for M rows."""
    w = packed.blocked_weight() if x.shape[0] < packed.panels_from() else packed.panel_weight()
    return packed.small(x, w, packed._small_bias, None, packed._act_id)[:, :packed.out_features]


def contenders(packed: PackedLinear, x: torch.Tensor) -> dict:
    """The two calls timed: the native kernel and oneDNN."""
    return {"attnkit": lambda: native(packed, x),
            "oneDNN": lambda: torch.ops.mkldnn._linear_pointwise(x, packed.packed, packed.bias, *packed._post_op)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 4, 13, 32])
    p.add_argument("--shapes", nargs="+", default=["256x768", "256x1024", "1024x256", "256x8000"],
                   help="in_features x out_features")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--dtypes", nargs="+", choices=("float32", "bfloat16"), default=["float32", "bfloat16"],
                   help="bfloat16 needs AVX512-BF16 in both engines (not with ONEDNN_MAX_CPU_ISA=AVX2)")
    args = p.parse_args()
    shapes = []
    for s in args.shapes:
        try:
            k, n = (int(v) for v in s.split("x"))
        except ValueError:
            p.error(f"--shapes: {s!r} is not IN x OUT, e.g. 256x1024")
        shapes.append((k, n))
    if any(r < 1 or r > 4096 for r in args.rows):
        p.error("--rows: from 1 to 4096")
    torch.set_num_threads(args.threads)
    print(f"# bench/linear.py, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit()}")
    print(f"# {machine()}; weights in cache")
    out = []
    torch.manual_seed(0)
    with torch.no_grad():
        for k, n in shapes:
            for dtype in (getattr(torch, d) for d in args.dtypes):
                packed = PackedLinear(nn.Linear(k, n).to(dtype))
                if packed.small is None:
                    print(f"# {dtype}: the native kernel does not run here", flush=True)
                    continue
                for m in args.rows:
                    x = torch.randn(m, k, dtype=dtype)
                    ours = native(packed, x)
                    peer = torch.ops.mkldnn._linear_pointwise(x, packed.packed, packed.bias, *packed._post_op)
                    torch.testing.assert_close(ours.float(), peer.float(), atol=5e-2, rtol=5e-2)  # same product
                    iters = max(50, int(1e9 / (m * k * n)))
                    t = interleaved_medians(contenders(packed, x), iters=iters, repeats=args.repeats, warmup=iters)
                    flops = 2 * m * k * n
                    out.append([f"{k} -> {n}", str(dtype).removeprefix("torch."), m, f"{1e6 * t['attnkit']:.1f}",
                                f"{flops / t['attnkit'] / 1e9:.0f}", f"{1e6 * t['oneDNN']:.1f}",
                                f"{t['oneDNN'] / t['attnkit']:.2f}x"])
                    print(f"# {k} -> {n} {dtype} {m} rows done", flush=True)
    print(table(["layer", "dtype", "rows", "attnkit us", "attnkit GFLOP/s", "oneDNN us", "attnkit speed-up"], out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
