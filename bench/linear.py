"""A sentence's linear layers: attnkit's native kernel for a few rows against oneDNN, float32 and bfloat16.

    flock /tmp/attnkit-heavy.lock .venv/bin/python bench/linear.py [--threads 2] [--rows 1 4 13 32]
        [--shapes 256x768 256x1024 1024x256 256x8000] [--repeats 15]

``attnkit.inference.PackedLinear.rows`` (x W^T + b for up to 32 rows: W blocked up to 4 rows, in
panels of 16 columns from 5; bfloat16 panels take AVX512-BF16's dot products of pairs) against oneDNN on
the same pre-packed weights (``torch.ops.mkldnn._linear_pointwise``, what ``PackedLinear`` runs for more
rows), for the shapes of the NAT benchmark's model (d 256, FFN 1,024, 8,000 words) by default. The
weights stay in cache (one layer timed over and over): the kernels' own rate. Interleaved, medians.
"""

from __future__ import annotations

import argparse
import datetime

import torch
from _timing import commit, interleaved_medians, machine, table
from torch import nn

from attnkit.inference import PackedLinear


def contenders(packed: PackedLinear, x: torch.Tensor) -> dict:
    """The two calls timed: the native kernel (what PackedLinear.rows runs for these rows) and oneDNN."""
    return {"attnkit": lambda: packed.rows(x),
            "oneDNN": lambda: torch.ops.mkldnn._linear_pointwise(x, packed.packed, packed.bias, *packed._post_op)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 4, 13, 32])
    p.add_argument("--shapes", nargs="+", default=["256x768", "256x1024", "1024x256", "256x8000"],
                   help="in_features x out_features")
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    shapes = []
    for s in args.shapes:
        try:
            k, n = (int(v) for v in s.split("x"))
        except ValueError:
            p.error(f"--shapes: {s!r} is not IN x OUT, e.g. 256x1024")
        shapes.append((k, n))
    if any(r < 1 or r > 32 for r in args.rows):
        p.error("--rows: the native kernel takes 1 to 32 rows")
    torch.set_num_threads(args.threads)
    print(f"# bench/linear.py, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit()}")
    print(f"# {machine()}; weights in cache")
    out = []
    torch.manual_seed(0)
    with torch.no_grad():
        for k, n in shapes:
            for dtype in (torch.float32, torch.bfloat16):
                packed = PackedLinear(nn.Linear(k, n).to(dtype))
                if packed.small is None:
                    print(f"# {dtype}: the native kernel does not run here", flush=True)
                    continue
                for m in args.rows:
                    x = torch.randn(m, k, dtype=dtype)
                    ours = packed.rows(x)
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
