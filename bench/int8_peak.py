"""The CPU's int8 multiply-add rates, measured: the ceiling of each way int8 engines compute their products.

A small C probe (built here with the system C compiler, ``cc``) times independent chains of one way each, on the
whole vector width it names, with its operands in registers (no loads: a rate no GEMM can beat):
- ``sign trick``: ``vpsignb`` (sign of x onto w), ``vpmaddubsw`` (|x| u8 x w s8, pairs into 16 bits),
  ``vpmaddwd`` by ones (into int32), ``vpaddd``: 32 products, exact for 8-bit x and w (attnkit's AVX2 products);
- ``u8 x s8``: the same without ``vpsignb``, x as u8: 32 products whose 16-bit pairs saturate beyond 2^15 for 8-bit
  operands (ONNX Runtime's and fbgemm's AVX2 products; exact only with 7-bit x or w);
- ``int16``: ``vpmaddwd`` on 16-bit operands, ``vpaddd``: 16 products, exact;
- ``vnni``: ``vpdpbusd`` on zmm, 64 products into int32 (AVX512-VNNI; attnkit's and ONNX Runtime's AVX-512 products).

One copy runs per thread, all at once; the best of ``rounds`` rounds is kept (the median over the copies of a
round), as ``cpu_peak.py`` does for float32. Needs x86-64 with AVX2 (AVX512-VNNI for the last) and a C compiler.

    .venv/bin/python bench/int8_peak.py [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from cpu_peak import compile_probe, cpu_flags

PROBE = r"""
#include <stdio.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
/* chain i accumulates in ymm i (0-5) through the temporary ymm t (6-11); ymm12-15 are the operands */
#define SIGN(i, t) "vpsignb %%ymm12, %%ymm14, %%ymm" #t "\n\tvpmaddubsw %%ymm" #t ", %%ymm15, %%ymm" #t "\n\t" \
    "vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n\tvpaddd %%ymm" #t ", %%ymm" #i ", %%ymm" #i "\n\t"
#define U8S8(i, t) "vpmaddubsw %%ymm14, %%ymm15, %%ymm" #t "\n\tvpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n\t" \
    "vpaddd %%ymm" #t ", %%ymm" #i ", %%ymm" #i "\n\t"
#define I16(i, t) "vpmaddwd %%ymm14, %%ymm15, %%ymm" #t "\n\tvpaddd %%ymm" #t ", %%ymm" #i ", %%ymm" #i "\n\t"
#define VNNI(i, t) "vpdpbusd %%zmm14, %%zmm15, %%zmm" #i "\n\tvpdpbusd %%zmm14, %%zmm15, %%zmm" #t "\n\t"
#define SIX(C) C(0, 6) C(1, 7) C(2, 8) C(3, 9) C(4, 10) C(5, 11)
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11"
#define RATE(C, products) do { double t = now(); \
    for (long i = 0; i < n; i++) __asm__ volatile(SIX(C) ::: CLOBBER); \
    printf(" %.6e", 6.0 * (products) * n / (now() - t)); } while (0)
int main(int argc, char **argv) {
    long n = 20000000;
    RATE(SIGN, 32); RATE(U8S8, 32); RATE(I16, 16);
    if (argc > 1 && strcmp(argv[1], "vnni") == 0) RATE(VNNI, 128); else printf(" 0");
    printf("\n");
    return 0;
}
"""

WAYS = ("sign trick", "u8 x s8", "int16", "vnni")  # the probe's columns, in order
WHAT = {"sign trick": "AVX2 vpsignb + vpmaddubsw + vpmaddwd + vpaddd: exact at 8 bits (attnkit avx2)",
        "u8 x s8": "AVX2 vpmaddubsw + vpmaddwd + vpaddd: pairs saturate at 8 bits (ONNX Runtime, fbgemm on AVX2)",
        "int16": "AVX2 vpmaddwd + vpaddd on 16-bit operands: exact",
        "vnni": "AVX512-VNNI vpdpbusd zmm (attnkit avx512, ONNX Runtime on AVX-512)"}


def int8_rates(threads: int, rounds: int = 5) -> dict[str, float]:
    """Multiply-adds per second of the whole machine (``threads`` copies at once), in GMAC/s, by way (``WAYS``);
    ``vnni`` only where the CPU has AVX512-VNNI. SystemExit where the probe cannot be built here."""
    args_vnni = ["vnni"] if "avx512_vnni" in cpu_flags() else []
    best = dict.fromkeys(WAYS, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_probe(PROBE, Path(tmp), "avx2", "int8_peak", "AVX2")
        for _ in range(rounds):
            procs = [subprocess.Popen([str(exe), *args_vnni], stdout=subprocess.PIPE, text=True)
                     for _ in range(threads)]
            rows = [[float(v) for v in p.communicate()[0].split()] for p in procs]
            for i, way in enumerate(WAYS):
                best[way] = max(best[way], statistics.median(r[i] for r in rows))
    return {way: threads * rate / 1e9 for way, rate in best.items() if rate > 0}


def bound_lines(macs: float, rates: dict[str, float], peer_seconds: float | None, peer: str) -> list[str]:
    """A markdown table: for each way, its rate, the least time ``macs`` products take at it and, with
    ``peer_seconds``, the highest ratio over the peer any engine computing its products that way can reach."""
    head = ["way", "GMAC/s", "least time for the products, s"]
    head += [f"highest possible x {peer}"] if peer_seconds else []
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for way, rate in rates.items():
        least = macs / (rate * 1e9)
        row = [WHAT[way], f"{rate:.1f}", f"{least:.3f}"] + ([f"{peer_seconds / least:.2f}"] if peer_seconds else [])
        lines.append("| " + " | ".join(row) + " |")
    return lines


def main(argv=None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="copies run at once (default: cores)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.rounds < 1:
        ap.error(f"--threads and --rounds must be positive, got {args.threads} and {args.rounds}")
    rates = int8_rates(args.threads, args.rounds)
    print(f"int8 multiply-add rates, {args.threads} threads at once, best of {args.rounds} rounds:")
    print("| way | GMAC/s |\n|---|---:|")
    for way, rate in rates.items():
        print(f"| {WHAT[way]} | {rate:.1f} |")
    return rates


if __name__ == "__main__":
    main()
