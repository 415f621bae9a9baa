"""int8 sentence embeddings against float32 and ONNX Runtime int8: all-MiniLM-L6-v2, ``bench/embed.py``'s sentences.

    python bench/int8_embed.py [--n 2000] [--repeats 3] [--threads 2] [--latency-calls 200] [--no-time] [--no-onnx]
                               [--ort-isa auto|native|avx2] [--ort-reduce-range] [--no-bound]

Engines: attnkit float32 and int8 (``encode(dtype="int8")``; the path this machine takes is printed: attnkit's
native int8 kernels of the variant that runs, else fbgemm or the exact reference), and, where onnx and onnxruntime
import, the ONNX Runtime peer of sentence-transformers' ``export_dynamic_quantized_onnx_model(model,
"avx512_vnni", ...)`` built without optimum (``_onnx_peer.py``: the
same folder exported with ``torch.onnx.export`` into a temporary directory, ORT float32 as exported and ORT int8
quantised dynamically; same tokenizer, batch size, mean pooling and normalisation).
ONNX Runtime has no switch to force an instruction set; ``--ort-isa avx2`` (the default ``auto`` picks it when
``ATTNKIT_CPU_ISA`` forces attnkit to avx2 or generic) runs a copy of it whose XCR0 reads report no AVX-512 state, so
it takes the kernels it takes on an AVX2 CPU (``_ort_isa.py``); ``native`` runs the installed one as it is.

Prints the cosine of each to attnkit float32 over the sentences (mean and worst), and, unless ``--no-time``, the
seconds of each for all the sentences (interleaved repeats, medians; the cosines come from the first timed
round, after a warm-up on one batch), the ratios, the int8 bound (the linear layers' multiply-adds over this
CPU's rate for each way of computing them, ``int8_peak.py``; ``--no-bound`` skips it), and the batch-1 latency
of one short sentence (p50, p99 over ``--latency-calls`` calls per engine, interleaved in blocks of 20).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _timing import machine  # noqa: E402
from embed import linear_shapes, make_sentences  # noqa: E402

from attnkit.pretrained import builtin_path, load_pretrained  # noqa: E402

SHORT = "A man is playing a guitar on the street."


def engines(enc, args, tmp: Path) -> dict:
    """name -> fn(texts) -> (n, dim) vectors: attnkit float32 / int8, and the ONNX Runtime peer if it imports."""
    fns = {"attnkit float32": lambda t: enc.encode(t, batch_size=args.batch_size),
           "attnkit int8": lambda t: enc.encode(t, batch_size=args.batch_size, dtype="int8")}
    if args.no_onnx:
        return fns
    import _onnx_peer

    if ort_isa(args) == "avx2":
        import _ort_isa

        folder, n = _ort_isa.cap_avx2(tmp)
        sys.path.insert(0, str(folder))
        print(f"ONNX Runtime capped at AVX2: a copy in {folder.name}/ with {n} xgetbv reads patched (_ort_isa.py)")
    if (why := _onnx_peer.missing()) is not None:
        print(why)
        return fns
    folder = builtin_path("all-MiniLM-L6-v2")
    t0 = time.perf_counter()
    f32, i8 = _onnx_peer.export(folder, tmp, args.ort_reduce_range)
    settings = _onnx_peer.QUANT_SETTINGS.replace("reduce_range off", "reduce_range ON (7-bit weights)") \
        if args.ort_reduce_range else _onnx_peer.QUANT_SETTINGS
    print(f"ONNX export + quantisation {time.perf_counter() - t0:.1f} s; {settings}")
    threads = torch.get_num_threads()
    for name, path in (("ORT float32", f32), ("ORT int8", i8)):
        ort = _onnx_peer.OrtEncoder(path, folder, threads)
        fns[name] = lambda t, ort=ort: ort.encode(t, args.batch_size)
    return fns


def ort_isa(args) -> str:
    """"avx2" or "native": what ``--ort-isa`` asks, ``auto`` following ``ATTNKIT_CPU_ISA``."""
    if args.ort_isa != "auto":
        return args.ort_isa
    return "avx2" if os.environ.get("ATTNKIT_CPU_ISA", "").lower() in ("avx2", "generic") else "native"


def int8_bound(enc, texts: list[str], seconds: dict, ort: str) -> list[str]:
    """Lines: the linear layers' int8 multiply-adds for these word pieces (no padding counted), the least time
    they take at this CPU's rate for each way of computing them (``int8_peak.py``), the highest ratio over ORT
    int8 each way allows, and the share of its way's bound that attnkit int8 and ORT int8 reach."""
    import int8_peak

    from attnkit.functional.native import cpu_isa

    per_piece = enc.config.num_hidden_layers * sum(n * k for n, k in linear_shapes(enc.config))
    pieces = sum(len(e.ids) for e in enc.tokenize(texts, warn=False, ids_only=True))
    macs = per_piece * pieces
    try:
        rates = int8_peak.int8_rates(torch.get_num_threads())
    except (SystemExit, OSError, subprocess.CalledProcessError, ValueError) as e:
        return [f"int8 bound skipped: {e}"]
    vnni = "vnni" in rates
    ours = "vnni" if cpu_isa() == "avx512" and vnni else "sign trick"
    peer = "vnni" if ort == "native" and vnni else "u8 x s8"
    lines = [f"linear layers: {per_piece / 1e6:.2f} M int8 multiply-adds per word piece x {pieces} pieces = "
             f"{macs / 1e12:.3f} T (no padding counted)"]
    lines += int8_peak.bound_lines(macs, rates, seconds.get("ORT int8"), "ORT int8")
    least = {way: macs / (rate * 1e9) for way, rate in rates.items()}
    share = f"attnkit int8 reaches {least[ours] / seconds['attnkit int8']:.0%} of its way's bound ({ours})"
    if "ORT int8" in seconds:
        share += f", ORT int8 {least[peer] / seconds['ORT int8']:.0%} of its own ({peer})"
    return lines + [share]


def timed_rounds(fns: dict, texts: list[str], repeats: int) -> tuple[dict, dict]:
    """(seconds per engine per round, the first round's vectors), engines interleaved in each round."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    vectors = {}
    for r in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            out = fn(texts)
            times[k].append(time.perf_counter() - t0)
            if r == 0:
                vectors[k] = out
    return times, vectors


def latency(fns: dict, calls: int, block: int = 20) -> dict[str, list[float]]:
    """Milliseconds of each batch-1 call of SHORT, engines interleaved in blocks of ``block`` calls."""
    ms: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        for _ in range(5):
            fn([SHORT])
    for _ in range(-(-calls // block)):
        for k, fn in fns.items():
            for _ in range(block):
                t0 = time.perf_counter()
                fn([SHORT])
                ms[k].append(1e3 * (time.perf_counter() - t0))
    return ms


def report_cosines(vectors: dict, n: int) -> dict:
    ref, out = vectors["attnkit float32"], {}
    for k, v in vectors.items():
        if k == "attnkit float32":
            continue
        cos = F.cosine_similarity(v.float(), ref, dim=1)
        print(f"all-MiniLM-L6-v2, {n} sentences: cosine {k} to attnkit float32 mean {cos.mean():.6f}, "
              f"worst {cos.min():.6f} (sentence {int(cos.argmin())})")
        out[k] = (float(cos.mean()), float(cos.min()))
    return out


def report_times(times: dict, n: int) -> dict:
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:16s} median {med[k]:.2f} s ({n / med[k]:.0f} sentences/s; runs {', '.join(f'{t:.2f}' for t in v)})")
    print(f"attnkit int8 / attnkit float32 speed: {med['attnkit float32'] / med['attnkit int8']:.2f}x")
    if "ORT int8" in med:
        print(f"attnkit int8 / ORT int8 speed: {med['ORT int8'] / med['attnkit int8']:.2f}x; "
              f"attnkit float32 / ORT float32: {med['ORT float32'] / med['attnkit float32']:.2f}x; "
              f"ORT int8 / ORT float32: {med['ORT float32'] / med['ORT int8']:.2f}x")
    return med


def report_latency(ms: dict) -> dict:
    out = {}
    for k, v in ms.items():
        q = statistics.quantiles(v, n=100, method="inclusive")
        out[k] = (q[49], q[98])
        print(f"batch 1, one short sentence ({len(SHORT.split())} words), {k:16s} p50 {q[49]:.2f} ms, "
              f"p99 {q[98]:.2f} ms ({len(v)} calls)")
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads and ORT intra-op threads (default: torch's own choice)")
    ap.add_argument("--latency-calls", type=int, default=200, help="batch-1 calls per engine (0: none)")
    ap.add_argument("--no-time", action="store_true", help="only the cosines")
    ap.add_argument("--no-onnx", action="store_true", help="without the ONNX Runtime peer")
    ap.add_argument("--ort-isa", choices=("auto", "native", "avx2"), default="auto",
                    help="ONNX Runtime as installed (native) or capped at AVX2 (auto: avx2 when ATTNKIT_CPU_ISA "
                         "forces attnkit to avx2 or generic)")
    ap.add_argument("--no-bound", action="store_true", help="skip the int8 multiply-add rates (int8_peak.py)")
    ap.add_argument("--ort-reduce-range", action="store_true",
                    help="ONNX Runtime int8 with 7-bit weights (its advice without VNNI, against saturation)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    enc = load_pretrained("all-MiniLM-L6-v2")
    texts = make_sentences(enc.tokenizer.get_vocab(), args.n, 0)
    with tempfile.TemporaryDirectory(prefix="attnkit-onnx-") as tmp:
        fns = engines(enc, args, Path(tmp))
        for fn in fns.values():  # warm-up: one batch each
            fn(texts[:args.batch_size])
        times, vectors = timed_rounds(fns, texts, 1 if args.no_time else args.repeats)
        result = {"cosines": report_cosines(vectors, args.n)}
        if not args.no_time:
            result["seconds"] = report_times(times, args.n)
            if not args.no_bound:
                for line in int8_bound(enc, texts, result["seconds"], ort_isa(args)):
                    print(line)
            if args.latency_calls > 0:
                result["latency_ms"] = report_latency(latency(fns, args.latency_calls))
    from attnkit.functional.native import cpu_isa
    from attnkit.inference.quant_linear import float_linears, int8_path

    print(f"attnkit int8 path: {int8_path()} (native variant {cpu_isa()}); kept in float32: "
          f"{', '.join(float_linears()) or 'nothing'}")
    print(f"machine: {machine()}")
    return result


if __name__ == "__main__":
    main()
