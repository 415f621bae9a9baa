"""The CPU's arithmetic peak, measured, and how much of it the GEMMs behind a BERT layer reach.

A small C probe (built here with the system C compiler, ``cc``) times:
- the clock: a chain of dependent integer adds (one per cycle on x86-64);
- 12 independent chains of ``vfmadd231ps zmm`` (16 float32 multiply-adds, 32 FLOPs each);
- 12 independent chains of ``vdpbf16ps zmm`` (32 bfloat16 products summed into 16 float32, 64 FLOPs).

One copy runs per thread, all at once, so the peak is the whole machine's; the best of 5 such rounds
is kept (a peak is an upper bound, and on a shared host the rate drops at times: one single round
here measured 0.51 instructions per cycle). Then the GEMMs of a BERT layer of the given sizes (fused
QKV, attention output, FFN up, FFN down; ``m`` rows) are timed with oneDNN on packed weights (the
kernel attnkit's pretrained encoder runs) and with ``torch.mm`` (the one ``nn.Linear`` runs), and
shown as a share of that peak. Needs an x86-64 CPU with AVX-512
(BF16 for the bfloat16 row) and a C compiler.

    .venv/bin/python bench/cpu_peak.py [--threads N] [--m 2240] [--hidden 384] [--ffn 1536]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import torch
from _timing import machine, table, time_once

PROBE = r"""
#include <stdio.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
#define TWELVE(op) \
    op " %%zmm14, %%zmm15, %%zmm0\n\t" op " %%zmm14, %%zmm15, %%zmm1\n\t" op " %%zmm14, %%zmm15, %%zmm2\n\t" \
    op " %%zmm14, %%zmm15, %%zmm3\n\t" op " %%zmm14, %%zmm15, %%zmm4\n\t" op " %%zmm14, %%zmm15, %%zmm5\n\t" \
    op " %%zmm14, %%zmm15, %%zmm6\n\t" op " %%zmm14, %%zmm15, %%zmm7\n\t" op " %%zmm14, %%zmm15, %%zmm8\n\t" \
    op " %%zmm14, %%zmm15, %%zmm9\n\t" op " %%zmm14, %%zmm15, %%zmm10\n\t" op " %%zmm14, %%zmm15, %%zmm11\n\t"
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11"
int main(int argc, char **argv) {
    long n = 100000000, x = 0; double t = now();
    for (long i = 0; i < n; i++) __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    double hz = 4.0 * n / (now() - t);
    n = 25000000; t = now();
    for (long i = 0; i < n; i++) __asm__ volatile(TWELVE("vfmadd231ps") ::: CLOBBER);
    double fma = 12.0 * n / (now() - t);
    double dot = 0.0;
    if (argc > 1) {
        t = now();
        for (long i = 0; i < n; i++) __asm__ volatile(TWELVE("vdpbf16ps") ::: CLOBBER);
        dot = 12.0 * n / (now() - t);
    }
    printf("%.6e %.6e %.6e %ld\n", hz, fma, dot, x);
    return 0;
}
"""


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


def compile_probe(source: str, workdir: Path, flag: str, who: str, what: str) -> Path:
    """Compile a C probe into ``workdir``; SystemExit naming ``who`` when the CPU lacks ``flag`` (``what`` says
    which instruction set that is) or no C compiler is found."""
    if flag not in cpu_flags():
        raise SystemExit(f"{who}: needs an x86-64 CPU with {what} (no {flag} in /proc/cpuinfo)")
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise SystemExit(f"{who}: needs a C compiler (`cc` or `gcc` on PATH, or $CC)")
    src, exe = workdir / f"{who}.c", workdir / who
    src.write_text(source)
    subprocess.run([cc, "-O2", "-o", str(exe), str(src)], check=True)
    return exe


def build_probe(workdir: Path) -> Path:
    """Compile the probe; a clear error when the CPU or the compiler cannot run it."""
    return compile_probe(PROBE, workdir, "avx512f", "cpu_peak", "AVX-512")


def probe_peak(exe: Path, threads: int, bf16: bool, repeats: int = 5) -> dict[str, float]:
    """Clock (Hz), FMA and BF16-dot instructions/s per thread: one copy per thread run at once, the
    median over the copies, the best of ``repeats`` such rounds (a peak is an upper bound; on a shared
    host other work only lowers what a round measures)."""
    args = [str(exe)] + (["bf16"] if bf16 else [])
    best = {"hz": 0.0, "fma": 0.0, "dot": 0.0}
    for _ in range(repeats):
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, text=True) for _ in range(threads)]
        rows = [tuple(float(v) for v in p.communicate()[0].split()[:3]) for p in procs]
        for i, key in enumerate(best):
            best[key] = max(best[key], statistics.median(r[i] for r in rows))
    return best


FLOPS_PER_INSTR = {"float32": 32, "bfloat16": 64}  # zmm vfmadd231ps: 16 multiply-adds; vdpbf16ps: 32 products


def peak_gflops(threads: int, rounds: int = 5) -> dict[str, float]:
    """The machine's peak GFLOP/s by dtype over ``threads`` threads, plus "clock_ghz" and per-dtype
    instructions per cycle ("<dtype> ipc"); bfloat16 only where the CPU has AVX512-BF16.
    Raises SystemExit when the probe cannot be built here (see ``build_probe``)."""
    bf16 = "avx512_bf16" in cpu_flags()
    with tempfile.TemporaryDirectory() as tmp:
        peak = probe_peak(build_probe(Path(tmp)), threads, bf16, rounds)
    out = {"clock_ghz": peak["hz"] / 1e9}
    for name, rate in (("float32", peak["fma"]), ("bfloat16", peak["dot"])):
        if rate:
            out[name] = threads * FLOPS_PER_INSTR[name] * rate / 1e9
            out[f"{name} ipc"] = rate / peak["hz"]
    return out


def gemm_rates(m: int, shapes: list[tuple[int, int]], dtype: torch.dtype, repeats: int = 7) -> dict[str, float]:
    """GFLOP/s over all ``shapes`` (n, k) of x (m, k) @ W^T, median time per shape, by kernel:
    "oneDNN packed" (weights reordered once, as attnkit's encoder runs them) and "torch.mm"."""
    ops = torch.ops.mkldnn
    out = {}
    for kernel in ("oneDNN packed", "torch.mm"):
        flops = secs = 0.0
        for n, k in shapes:
            x, w = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype)
            if kernel == "torch.mm":
                wt = w.t()
                fn = lambda x=x, wt=wt: torch.mm(x, wt)  # noqa: E731
            else:
                packed = ops._reorder_linear_weight(w, None)
                fn = lambda x=x, p=packed: ops._linear_pointwise(x, p, None, "none", [], "")  # noqa: E731
            with torch.inference_mode():
                fn()
                secs += statistics.median(time_once(fn, 1) for _ in range(repeats))
            flops += 2.0 * m * n * k
        out[kernel] = flops / secs / 1e9
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0, help="threads (default: torch's own choice)")
    ap.add_argument("--m", type=int, default=2240, help="GEMM rows (a batch of 64 texts of 35 word pieces)")
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--ffn", type=int, default=1536)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)
    for name in ("threads", "m", "hidden", "ffn", "repeats"):
        if getattr(args, name) < (0 if name == "threads" else 1):
            ap.error(f"--{name} must be positive, got {getattr(args, name)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    threads, rounds = torch.get_num_threads(), 5
    peak = peak_gflops(threads, rounds)
    h, f = args.hidden, args.ffn
    shapes = [(3 * h, h), (h, h), (f, h), (h, f)]
    rows, result = [], {"clock_ghz": peak["clock_ghz"]}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        if name not in peak:
            continue
        top = peak[name]
        r = gemm_rates(args.m, shapes, dtype, args.repeats)
        rows.append([name, f"{peak[f'{name} ipc']:.2f}", f"{top:.1f}",
                     f"{r['oneDNN packed']:.1f}", f"{r['oneDNN packed'] / top:.3f}",
                     f"{r['torch.mm']:.1f}", f"{r['torch.mm'] / top:.3f}"])
        result[name] = {"peak": top, **r}
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"machine: {machine()}; {date}")
    print(f"clock {peak['clock_ghz']:.2f} GHz (best of {rounds} rounds of {threads} threads run at once); "
          f"GEMMs of a layer with hidden {h}, FFN {f}, {args.m} rows")
    print(table(["dtype", "zmm instr / cycle / thread", "peak GFLOP/s", "oneDNN packed GFLOP/s",
                 "x peak", "torch.mm GFLOP/s", "x peak"], rows))
    return result


if __name__ == "__main__":
    main()
