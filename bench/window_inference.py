"""Benchmark: window attention in inference, the automatic choice against the backends it passed over.

For each dtype, head shape (``--shapes`` HxD), window (``--windows`` w: keys i-w .. i+w) and length
(``--lengths``): batch 1, a ``window(w, w) & padding`` mask (a speech encoder's, no padded key), in
``torch.inference_mode``. Rows: ``attnkit.attention`` with no backend (its pick printed) and the same call
with each peer backend named: ``sdpa`` (torch's fused kernel with the dense band mask), ``local`` (the band
kernel) and, in bfloat16, ``math_grouped``. Medians of ``--repeats`` rounds, the methods interleaved;
ratios are peer time / automatic time (> 1: the automatic choice is faster).

    flock /tmp/attnkit-heavy.lock .venv/bin/python bench/window_inference.py --threads 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import commit, interleaved_medians, machine, table  # noqa: E402

import attnkit  # noqa: E402
from attnkit import masks as M  # noqa: E402
from attnkit.functional import select_backend  # noqa: E402
from attnkit.functional.masks import for_heads  # noqa: E402


def row(dtype: torch.dtype, heads: int, dim: int, w: int, length: int, repeats: int) -> list[object]:
    q, k, v = (torch.randn(1, heads, length, dim, generator=torch.Generator().manual_seed(i)).to(dtype)
               for i in range(3))
    mask = for_heads(M.window(w, w) & M.padding(torch.tensor([length])))
    peers = ["sdpa", "local"] + (["math_grouped"] if dtype != torch.float32 else [])
    with torch.inference_mode():
        pick = select_backend(q, k, v, mask)
        ref = attnkit.attention(q, k, v, mask, backend="math").float()
        err = (attnkit.attention(q, k, v, mask).float() - ref).abs().max().item()
        fns = {"auto": lambda: attnkit.attention(q, k, v, mask)}
        fns.update({p: (lambda p=p: attnkit.attention(q, k, v, mask, backend=p)) for p in peers})
        t = interleaved_medians(fns, iters=5, repeats=repeats)
    ratios = [f"{t[p] / t['auto']:.2f}" if p in t else "-" for p in ("sdpa", "local", "math_grouped")]
    return [str(dtype).removeprefix("torch."), f"{heads}x{dim}", w, length, pick, f"{1e6 * t['auto']:.0f}",
            *ratios, f"{err:.1e}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--shapes", nargs="+", default=["4x36", "8x64"], help="heads x head size")
    ap.add_argument("--windows", nargs="+", type=int, default=[8, 32, 64])
    ap.add_argument("--lengths", nargs="+", type=int, default=[64, 256, 1024, 4096])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{machine()}; commit {commit()}")
    rows = []
    for name in args.dtypes:
        for shape in args.shapes:
            heads, dim = (int(x) for x in shape.split("x"))
            for w in args.windows:
                for length in args.lengths:
                    if 2 * w + 1 <= length:
                        rows.append(row(getattr(torch, name), heads, dim, w, length, args.repeats))
    print(table(["dtype", "heads", "w", "L", "automatic", "us", "sdpa / auto", "local / auto",
                 "math_grouped / auto", "max |auto - math|"], rows))


if __name__ == "__main__":
    main()
