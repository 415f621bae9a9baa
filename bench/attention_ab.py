"""A/B of ``attnkit.attention`` between this checkout and a git revision: one process, calls interleaved.

On a shared, loaded machine two separate runs of a benchmark can differ by several times; here both
versions run in the same process, alternating repeat by repeat, so the ratio holds under any load.
The revision's ``attnkit/`` is copied (``git archive``) into a temporary folder as ``attnkit_base``
(its ``attnkit`` imports renamed); both versions load their own native kernel.

Cases: the short-sequence inference of ``bench/attention.py --short`` (12 heads of 32, packed QKV
views, heads merged, ~2880 tokens) in bfloat16 and float32 with the automatic choice; ``short`` with a
``segments`` mask as the pretrained encoder calls it; per-call overhead on small inputs (automatic
choice, with and without masks and autograd); ``local`` on a window of 128 (8 heads of 64),
forward and forward + backward. Ratio = base time / this checkout's time (> 1: this checkout faster).

    .venv/bin/python bench/attention_ab.py --base main [--repeats 7] [--threads 2] [--skip-local]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch
from _timing import interleaved_medians, machine, table

import attnkit

ROOT = Path(__file__).resolve().parent.parent


def load_base(rev: str, where: Path):
    """``attnkit`` as of ``rev``, importable as ``attnkit_base``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "attnkit"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(where, filter="data")
    (where / "attnkit").rename(where / "attnkit_base")
    for f in (where / "attnkit_base").rglob("*.py"):
        text = f.read_text()
        f.write_text(re.sub(r'(?<![\w.])attnkit(?=[.\s"\'])(?!_)', "attnkit_base", text))
    sys.path.insert(0, str(where))
    return importlib.import_module("attnkit_base")


def short_cases(new, base, dtype, lengths):
    rows = []
    for n in lengths:
        b = max(1, 2880 // n)
        q, k, v = torch.randn(b, n, 3, 12, 32, dtype=dtype).permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, L, d)
        seg = [n] * b  # the encoder's packing: B texts end to end in one row
        qs, ks, vs = (t.transpose(0, 1).reshape(1, 12, b * n, 32) for t in (q, k, v))

        def run(mod, q=q, k=k, v=v, b=b, n=n):
            return mod.attention(q, k, v).transpose(1, 2).reshape(b, n, 12 * 32)

        def packed(mod, seg=seg, q=qs, k=ks, v=vs):
            return mod.attention(q, k, v, mod.masks.segments(seg), backend="short")

        rows.append((f"{str(dtype)[6:]} L={n} auto", run))
        if dtype in (torch.float32, torch.bfloat16):
            rows.append((f"{str(dtype)[6:]} L={n} short+segments", packed))
    return rows


def overhead_cases():
    q, k, v = (torch.randn(2, 4, 8, 16) for _ in range(3))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    lengths = torch.tensor([8, 5])
    return [
        ("tiny auto, no mask", lambda m: m.attention(q, k, v)),
        ("tiny auto, padding", lambda m: m.attention(q, k, v, m.masks.padding(lengths))),
        ("tiny math, padding", lambda m: m.attention(q, k, v, m.masks.padding(lengths), backend="math")),
        ("tiny grad, padding (sdpa)", lambda m: m.attention(qg, kg, vg, m.masks.padding(lengths))),
        ("tiny grad, causal (sdpa)", lambda m: m.attention(qg, kg, vg, m.masks.causal())),
    ]


def local_cases(lengths):
    rows = []
    for n in lengths:
        q, k, v = (torch.randn(1, 8, n, 64, requires_grad=True) for _ in range(3))
        g = torch.randn(1, 8, n, 64)

        def fwd(m, q=q, k=k, v=v):
            with torch.no_grad():
                return m.attention(q, k, v, m.masks.window(128, 128))

        def fwd_bwd(m, q=q, k=k, v=v, g=g):
            m.attention(q, k, v, m.masks.window(128, 128)).backward(g)
            q.grad = k.grad = v.grad = None

        rows += [(f"local fwd L={n}", fwd), (f"local fwd+bwd L={n}", fwd_bwd)]
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base", default="main", help="git revision to compare against")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128])
    p.add_argument("--local-lengths", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--skip-local", action="store_true")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base(a.base, Path(tmp))
        print(f"# attnkit.attention, this checkout against {a.base}, interleaved medians of {a.repeats}\n"
              f"# {machine()}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
        cases = [(name, fn, True, 5) for dt in (torch.bfloat16, torch.float32)
                 for name, fn in short_cases(attnkit, base, dt, a.lengths)]
        cases += [(name, fn, name.startswith("tiny grad") is False, 300) for name, fn in overhead_cases()]
        if not a.skip_local:
            cases += [(name, fn, False, 1) for name, fn in local_cases(a.local_lengths)]
        rows = []
        for name, fn, inference, iters in cases:
            ctx = torch.inference_mode() if inference else torch.enable_grad()
            with ctx:
                t = interleaved_medians({"base": lambda fn=fn: fn(base), "new": lambda fn=fn: fn(attnkit)},
                                        iters=iters, repeats=a.repeats)
            rows.append([name, t["base"] * 1e3, t["new"] * 1e3, t["base"] / t["new"]])
            print(f"  {name}: done", flush=True)
        print(table(["case", f"{a.base} ms", "this ms", f"{a.base} / this"], rows))


if __name__ == "__main__":
    main()
