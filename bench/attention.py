"""Forward+backward time of attnkit.attention (automatic backend) against torch SDPA called directly
and the naive matrix path, 8 heads, d=64, float32, batch 1.

    .venv/bin/python bench/attention.py [--lengths 512 1024 2048 4096] [--repeats 7] [--causal]

``--short``: the sentence-embedding case instead: inference forward, bfloat16 (or ``--dtype float32``),
12 heads of 32 taken as views of one packed QKV tensor, then the heads merged to (B, L, 384) as a
layer needs them (a copy unless the backend wrote that layout), about 2880 tokens per batch (B = 2880 // L),
L = 16..128 by default: attnkit's automatic choice against SDPA and the backends it chooses among
(``math_grouped``, ``tiled``, ``short``), to place their automatic rules.

    .venv/bin/python bench/attention.py --short [--dtype float32] [--threads 1]
"""

from __future__ import annotations

import argparse
import datetime

import torch
import torch.nn.functional as F
from _timing import interleaved_medians, machine, table

import attnkit
from attnkit import masks
from attnkit.functional import select_backend


def naive(q, k, v, causal):
    a = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5  # (B, H, L, L)
    if causal:
        n = q.shape[-2]
        a = a.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return a.softmax(-1) @ v


def short(lengths: list[int], repeats: int, dtype: torch.dtype) -> None:
    print(f"# attention forward (inference) + head merge, {dtype}, H=12, d=32, B*L ~ 2880, q/k/v views of packed QKV\n"
          f"# {machine()}, {datetime.date.today()}")
    rows = []
    names = (("attnkit", None), ("sdpa", "sdpa"), ("math_grouped", "math_grouped"), ("tiled", "tiled"),
             ("short", "short"))
    for n in lengths:
        b = max(1, 2880 // n)
        q, k, v = torch.randn(b, n, 3, 12, 32, dtype=dtype).permute(2, 0, 3, 1, 4).unbind(0)  # 3x(B,H,L,d)
        with torch.inference_mode():
            auto = select_backend(q, k, v, None, None, False)
        def call(be, q=q, k=k, v=v, b=b, n=n):  # attention, then merge the heads as a layer must: (B, L, H*d)
            return attnkit.attention(q, k, v, backend=be).transpose(1, 2).reshape(b, n, 12 * 32)

        fns = {name: (lambda be=be: call(be)) for name, be in names}
        with torch.inference_mode():
            t = interleaved_medians(fns, iters=5, repeats=repeats)
        rows.append([n, b, auto, *(t[name] * 1e3 for name, _ in names), t["sdpa"] / t["attnkit"]])
    print(table(["L", "B", "auto picks", "attnkit ms", "SDPA ms", "math_grouped ms", "tiled ms", "short ms",
                      "SDPA/attnkit"], rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--lengths", type=int, nargs="+", default=None)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--causal", action="store_true", help="use a causal mask in all three")
    p.add_argument("--short", action="store_true", help="short sequences, inference (see above)")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16", help="for --short")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own choice)")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.short:
        return short(a.lengths or [16, 24, 32, 40, 48, 56, 64, 96, 128], a.repeats, getattr(torch, a.dtype))
    a.lengths = a.lengths or [512, 1024, 2048, 4096]
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
