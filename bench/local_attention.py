"""Benchmark: structured attention kernels against their peers (a script, not a test).

Suite "local" (default): sliding-window attention, window ``--window`` each side, batch 1,
``--heads`` heads of size ``--dim``, float32, at each ``--lengths``:

- attnkit   ``attnkit.attention(q, k, v, masks.window(w, w))`` (auto-picks the "local" kernel)
- sdpa+mask torch SDPA with a dense (L, L) bool band mask (skipped when the mask would not fit)
- flex      ``torch.compile(flex_attention)`` with ``create_block_mask`` (compile time reported apart)
- math      attnkit's reference, dense scores (only at small L)

Suite "alibi": exact attention with an ALiBi bias (causal), attnkit "chunked" (bias per tile)
against SDPA with the dense (H, L, L) bias.

Times are medians of ``--repeats`` runs, the methods interleaved round-robin so they share the
machine's load. Peak memory: each (method, L, mode) is run in a fresh subprocess; the peak resident
set (VmHWM, reset through /proc/self/clear_refs after the inputs exist and after any warm-up or
compile) minus the resident set before the call. So it counts every byte the call touches
(allocator caches included), not only torch tensors.

    python bench/local_attention.py --lengths 4096 16384 65536 --repeats 5
    python bench/local_attention.py --suite alibi --lengths 2048 4096 8192 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import attnkit
from attnkit import masks as M
from attnkit.functional.bias import ALiBiBias
from attnkit.functional.positional import alibi_bias, alibi_slopes


def _proc_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def _inputs(length, heads, dim, grad=False):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, heads, length, dim, generator=g).requires_grad_(grad) for _ in range(3)]


def make_call(method: str, length: int, a):
    """A zero-argument function running ``method`` once forward (and backward if ``a.backward``)."""
    q, k, v = _inputs(length, a.heads, a.dim, grad=a.backward)
    w = a.window
    if a.suite == "alibi":
        if method == "attnkit":
            bias = ALiBiBias(alibi_slopes(a.heads))
            fwd = lambda: attnkit.attention(q, k, v, M.causal(), bias=bias, backend="chunked")  # noqa: E731
        elif method == "sdpa+bias":
            dense = alibi_bias(alibi_slopes(a.heads), length, length)  # (H, L, L), counted in its memory
            dense = dense.masked_fill(~M.causal().materialize(length, length, 3), float("-inf"))
            fwd = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense)  # noqa: E731
        else:
            raise ValueError(method)
    elif method == "attnkit":
        mask = M.window(w, w)
        fwd = lambda: attnkit.attention(q, k, v, mask)  # noqa: E731
    elif method == "sdpa+mask":
        dense = M.window(w, w).materialize(length, length, 4)  # (1, 1, L, L) bool
        fwd = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense)  # noqa: E731
    elif method == "math":
        mask = M.window(w, w)
        fwd = lambda: attnkit.attention(q, k, v, mask, backend="math")  # noqa: E731
    elif method == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def band(b, h, qi, ki):
            return ((qi - ki) <= w) & ((ki - qi) <= w)

        t0 = time.perf_counter()
        block = torch.compile(create_block_mask)(band, None, None, length, length, device="cpu")
        make_call.block_mask_s = time.perf_counter() - t0
        compiled = torch.compile(flex_attention, dynamic=False)
        fwd = lambda: compiled(q, k, v, block_mask=block)  # noqa: E731
    else:
        raise ValueError(method)
    if not a.backward:
        def run():
            with torch.no_grad():
                return fwd()
        return run

    def run_fb():
        out = fwd()
        out.backward(torch.ones_like(out))
        for t in (q, k, v):
            t.grad = None
    return run_fb


def measure_memory(method: str, length: int, a) -> dict:
    """In this (fresh) process: warm up once, reset the peak, run once, report the peak delta."""
    res = {"method": method, "L": length, "backward": a.backward}
    try:
        run = make_call(method, length, a)
        if method == "flex":
            t0 = time.perf_counter()
            run()  # compile
            res["compile_s"] = time.perf_counter() - t0
        base = _proc_kb("VmRSS")
        res["hwm_reset"] = _reset_peak()
        if not res["hwm_reset"]:
            base = _proc_kb("VmHWM")
        t0 = time.perf_counter()
        run()
        res["time_s"] = time.perf_counter() - t0
        res["peak_mb"] = (_proc_kb("VmHWM") - base) / 1024
    except Exception as e:  # report refusals (e.g. flex backward on CPU) instead of crashing
        res["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return res


def child_memory(method, length, a) -> dict:
    cmd = [sys.executable, __file__, "--child", method, str(length), "--suite", a.suite, "--heads", str(a.heads),
           "--dim", str(a.dim), "--window", str(a.window)] + (["--backward"] if a.backward else [])
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if not lines:
        return {"method": method, "L": length, "error": (p.stderr.strip().splitlines() or ["no output"])[-1][:160]}
    return json.loads(lines[-1])


def fits(method: str, length: int, a) -> bool:
    """Skip what cannot fit in this machine's memory (dense (L, L) masks, scores or biases)."""
    if method == "math":
        return length <= a.max_math
    if method in ("sdpa+mask", "sdpa+bias"):
        return length <= a.max_dense
    return True


def time_methods(methods, length, a) -> dict:
    """Round-robin medians of the steady-state time per method (flex: compile timed apart)."""
    calls, res = {}, {m: {} for m in methods}
    for m in methods:
        if not fits(m, length, a):
            res[m]["skip"] = "does not fit in memory"
            continue
        try:
            calls[m] = make_call(m, length, a)
            t0 = time.perf_counter()
            calls[m]()  # warm-up (and compile for flex)
            res[m]["first_s"] = time.perf_counter() - t0
            if m == "flex":
                res[m]["block_mask_s"] = make_call.block_mask_s
        except Exception as e:
            res[m]["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            calls.pop(m, None)
    times = {m: [] for m in calls}
    for _ in range(a.repeats):
        for m, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[m].append(time.perf_counter() - t0)
    for m, ts in times.items():
        res[m]["median_s"] = statistics.median(ts)
        res[m]["all_s"] = [round(t, 4) for t in ts]
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", choices=["local", "alibi"], default="local")
    p.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384, 65536])
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--methods", nargs="+", default=None)
    p.add_argument("--modes", nargs="+", default=["fwd", "fwd+bwd"], choices=["fwd", "fwd+bwd"])
    p.add_argument("--memory", action="store_true", help="also measure peak memory in subprocesses")
    p.add_argument("--max-dense", type=int, default=16384, help="largest L for dense masks / biases")
    p.add_argument("--max-math", type=int, default=4096, help="largest L for the math path")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--json", default=None, help="write all results here")
    p.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.child:
        print(json.dumps(measure_memory(a.child[0], int(a.child[1]), a)))
        return
    default = ["attnkit", "sdpa+mask", "flex", "math"] if a.suite == "local" else ["attnkit", "sdpa+bias"]
    methods = a.methods or default
    ref = methods[1] if len(methods) > 1 else methods[0]
    print(f"# suite={a.suite} heads={a.heads} d={a.dim} window={a.window} float32 batch=1 "
          f"threads={torch.get_num_threads()} torch={torch.__version__}")
    results = []
    for mode in a.modes:
        a.backward = mode == "fwd+bwd"
        for length in a.lengths:
            res = time_methods(methods, length, a)
            base = res.get("attnkit", {}).get("median_s")
            for m in methods:
                r = res[m]
                row = {"mode": mode, "L": length, "method": m, **r}
                if a.memory and "skip" not in r:
                    mem = child_memory(m, length, a)
                    row["peak_mb"] = mem.get("peak_mb")
                    row["mem_error"] = mem.get("error")
                results.append(row)
                med = r.get("median_s")
                note = r.get("skip") or r.get("error") or ""
                if m == "flex" and "first_s" in r:
                    note = f"compile+first call {r['first_s']:.1f}s (block mask {r['block_mask_s']:.1f}s)"
                ratio = f"{med / base:8.2f}x" if med and base else "       -"
                mem_s = f"{row['peak_mb']:9.0f}" if row.get("peak_mb") is not None else "        -"
                tm = f"{med * 1e3:10.1f}" if med else "         -"
                print(f"{mode:8s} L={length:6d} {m:10s} median {tm} ms  time/attnkit {ratio}  "
                      f"peak MB {mem_s}  {note}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    del ref


if __name__ == "__main__":
    main()
