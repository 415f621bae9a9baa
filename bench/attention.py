"""Forward+backward time of attnkit.attention (automatic backend) against torch SDPA called directly
and the naive matrix path, 8 heads, d=64, float32, batch 1.

    .venv/bin/python bench/attention.py [--lengths 512 1024 2048 4096] [--repeats 7] [--causal]
"""

from __future__ import annotations

import argparse
import datetime

import torch
import torch.nn.functional as F
from _timing import interleaved_medians, machine, table

import attnkit
from attnkit import masks


def naive(q, k, v, causal):
    a = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5  # (B, H, L, L)
    if causal:
        n = q.shape[-2]
        a = a.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return a.softmax(-1) @ v


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--causal", action="store_true", help="use a causal mask in all three")
    a = p.parse_args()
    print(f"# attention fwd+bwd, B=1, H=8, d=64, float32, causal={a.causal}\n# {machine()}, {datetime.date.today()}")
    rows = []
    for n in a.lengths:
        q, k, v = (torch.randn(1, 8, n, 64, requires_grad=True) for _ in range(3))
        g = torch.randn(1, 8, n, 64)
        mask = masks.causal() if a.causal else None

        def step(f, q=q, k=k, v=v, g=g):
            def run():
                out = f()
                out.backward(g)
                q.grad = k.grad = v.grad = None
            return run

        fns = {
            "attnkit": step(lambda q=q, k=k, v=v, m=mask: attnkit.attention(q, k, v, m)),
            "sdpa": step(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)),
            "naive": step(lambda q=q, k=k, v=v: naive(q, k, v, a.causal)),
        }
        iters = max(1, 2048 // n)
        t = interleaved_medians(fns, iters=iters, repeats=a.repeats)
        rows.append([n, t["attnkit"] * 1e3, t["sdpa"] * 1e3, t["naive"] * 1e3,
                     t["sdpa"] / t["attnkit"], t["naive"] / t["attnkit"]])
        print(f"  L={n}: done", flush=True)
    print(table(["L", "attnkit ms", "SDPA ms", "naive ms", "SDPA/attnkit (>=0.95 goal)", "naive/attnkit"], rows))


if __name__ == "__main__":
    main()
