"""Sentence embeddings: attnkit vs sentence-transformers on the same texts, same run.

Encodes N random sentences (4 to 60 words drawn from the model's own vocabulary, fixed seed) with
attnkit's ``SentenceEncoder`` (float32, and bfloat16) and with sentence-transformers
(``SentenceTransformer`` loaded offline from the same folder), batch 64, CPU. Each system is timed
``--repeats`` times, interleaved; medians are quoted. Prints sentences/s, the ratio to
sentence-transformers and the worst cosine between the outputs.

Then a bound measured in the same run (``--no-bound`` skips it): the linear layers' FLOPs for these
word pieces (no padding counted), over the best GEMM rate this machine gives on the model's own
shapes (oneDNN with packed weights, the kernel attnkit runs, and torch.mm, the one
sentence-transformers' nn.Linear runs), is the least time any implementation computing those
layers in that dtype can take; sentence-transformers' median over it is the highest ratio possible.
Where ``bench/cpu_peak.py``'s probe builds (AVX-512 and a C compiler), the same is given at this
machine's arithmetic peak (one zmm FMA or BF16 dot instruction per cycle per core, measured), which no
GEMM can beat.

    .venv/bin/python bench/embed.py [--n 2000] [--repeats 5] [--threads N] [--out embed.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import statistics
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import cpu_peak  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _timing import time_once, variant_note  # noqa: E402

from attnkit.pretrained import builtin_path, load_pretrained  # noqa: E402


def make_sentences(vocab: dict[str, int], n: int, seed: int = 0) -> list[str]:
    """n sentences of 4..60 whole-word vocabulary entries, some capitalised, some with punctuation."""
    words = sorted(w for w in vocab if w.isalpha() and not w.startswith("[") and len(w) > 1)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ws = [rng.choice(words) for _ in range(rng.randint(4, 60))]
        ws[0] = ws[0].capitalize()
        out.append(" ".join(ws) + rng.choice([".", "!", "?", ""]))
    return out


def cpu_name() -> str:
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_peak() -> dict[str, float]:
    """``cpu_peak.peak_gflops`` on every torch thread; empty where its probe cannot be built or run here."""
    try:
        return cpu_peak.peak_gflops(torch.get_num_threads())
    except (SystemExit, OSError, subprocess.CalledProcessError, ValueError):
        return {}


def linear_shapes(cfg) -> list[tuple[int, int]]:
    """(out, in) of a BERT layer's linear layers: fused QKV, attention output, FFN up, FFN down."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    return [(3 * h, h), (h, h), (i, h), (h, i)]


def bound(cfg, pieces: int, st_seconds: float, m: int, bf16: bool = True) -> list[str]:
    """Lines: linear-layer FLOPs of the workload, best GEMM rate here and the machine's peak, least
    times and highest ratios."""
    shapes = linear_shapes(cfg)
    per_piece = 2.0 * cfg.num_hidden_layers * sum(n * k for n, k in shapes)  # FLOPs per word piece
    total = per_piece * pieces
    peaks = machine_peak()
    lines = [f"linear layers: {per_piece / 1e6:.1f} MFLOP per word piece x {pieces} pieces = "
             f"{total / 1e12:.3f} TFLOP (no padding counted)",
             "| dtype | GEMM GFLOP/s oneDNN packed | torch.mm | least time for the linear layers, s | "
             "highest possible x sentence-transformers | machine peak GFLOP/s | least time at peak, s | "
             "highest possible at peak |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    kinds = (("fp32", "float32", torch.float32), ("bf16", "bfloat16", torch.bfloat16))
    for name, long_name, dtype in kinds if bf16 else kinds[:1]:
        r = cpu_peak.gemm_rates(m, shapes, dtype)
        best = max(r.values())
        least = total / (best * 1e9)
        row = f"| {name} | {r['oneDNN packed']:.1f} | {r['torch.mm']:.1f} | {least:.3f} | {st_seconds / least:.3f} |"
        if long_name in peaks:
            at_peak = total / (peaks[long_name] * 1e9)
            row += f" {peaks[long_name]:.1f} | {at_peak:.3f} | {st_seconds / at_peak:.3f} |"
        else:
            row += " n/a | n/a | n/a |"
        lines.append(row)
    return lines


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own choice)")
    ap.add_argument("--out", default=None, help="write a markdown table here")
    ap.add_argument("--no-bound", action="store_true", help="skip the same-run GEMM bound")
    ap.add_argument("--no-bf16", action="store_true", help="time float32 only (bfloat16 crawls without AVX512-BF16)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from sentence_transformers import SentenceTransformer

    ours = load_pretrained("all-MiniLM-L6-v2")
    st = SentenceTransformer(str(builtin_path("all-MiniLM-L6-v2")), device="cpu")
    st.eval()
    texts = make_sentences(ours.tokenizer.get_vocab(), args.n, args.seed)
    bs = args.batch_size
    pieces = sum(len(e.ids) for e in ours.tokenize(texts))

    def run_st():
        with torch.inference_mode():
            return st.encode(texts, batch_size=bs, convert_to_tensor=True, show_progress_bar=False)

    systems = {
        "sentence-transformers (fp32)": run_st,
        "attnkit (fp32)": lambda: ours.encode(texts, batch_size=bs),
        "attnkit (bf16)": lambda: ours.encode(texts, batch_size=bs, dtype=torch.bfloat16),
    }
    if args.no_bf16:
        del systems["attnkit (bf16)"]
    outputs = {k: fn() for k, fn in systems.items()}  # warm-up, and the outputs compared
    times: dict[str, list[float]] = {k: [] for k in systems}
    for _ in range(args.repeats):
        for k, fn in systems.items():
            times[k].append(time_once(fn, 1))
    ref = outputs["sentence-transformers (fp32)"].float().cpu()
    f32 = outputs["attnkit (fp32)"]
    rows = []
    base = statistics.median(times["sentence-transformers (fp32)"])
    for k in systems:
        med = statistics.median(times[k])
        cos_st = float(F.cosine_similarity(outputs[k].float().cpu(), ref, dim=1).min())
        cos_32 = float(F.cosine_similarity(outputs[k].float().cpu(), f32, dim=1).min())
        rows.append((k, med, args.n / med, base / med, cos_st, cos_32, min(times[k]), max(times[k])))

    machine = f"{cpu_name()}, {torch.get_num_threads()} threads ({os.cpu_count()} cores), torch {torch.__version__}"
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = ("| system | median s | sentences/s | x sentence-transformers | worst cos vs ST | "
              "worst cos vs attnkit fp32 | min..max s |")
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|"]
    for k, med, sps, ratio, c1, c2, lo, hi in rows:
        lines.append(f"| {k} | {med:.3f} | {sps:.1f} | {ratio:.3f} | {c1:.7f} | {c2:.7f} | {lo:.3f}..{hi:.3f} |")
    print(f"{args.n} sentences, {pieces} word pieces, batch {bs}, {args.repeats} repeats (medians)")
    print(f"machine: {machine}; {date}; {variant_note()}")
    print("\n".join(lines))
    if not args.no_bound:
        m = bs * round(pieces / args.n)  # a typical batch: batch size x mean word pieces per sentence
        extra = bound(ours.config, pieces, base, m, bf16=not args.no_bf16)
        print("\n".join(extra))
        lines += ["", *extra]
    cmd = " ".join(["python bench/embed.py", *(sys.argv[1:] if argv is None else argv)])
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(["# Sentence embeddings: attnkit vs sentence-transformers\n",
                               f"Command: `.venv/bin/{cmd}`",
                               f"Machine: {machine}", f"Date: {date}",
                               f"Workload: {args.n} sentences, {pieces} word pieces, batch {bs}, "
                               f"{args.repeats} repeats, medians\n", *lines, ""]))
    return {"rows": rows}


if __name__ == "__main__":
    main()
