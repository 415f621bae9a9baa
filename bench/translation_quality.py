"""Multi30k translation from scratch on this CPU: train, then score test_2016_flickr with sacreBLEU and chrF.

    flock /tmp/attnkit-heavy.lock .venv/bin/python bench/translation_quality.py [--direction de-en|en-de|both]
        [--minutes 60] [--threads 2] [--out runs/bench] [-- extra `attnkit train translate` options]

Each direction runs ``attnkit train translate --src X --tgt Y --max-minutes M --threads T`` (its defaults
otherwise: the recipe the command ships), then translates the 1,000 test sentences with the averaged
checkpoint, greedy and with beam 5, and prints:
- sacreBLEU (13a tokenisation, mixed case, its signature) and chrF: the comparable figure;
- lower-cased BLEU on 13a-tokenised text, the form older papers and tutorials report;
- wall-clock and process CPU time of training (on a shared machine the CPU time shows how much of the
  machine the run got) and decoding time.
Data: ../shared/data/multi30k (or $ATTNKIT_DATA).
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import sys
import time
import warnings
from pathlib import Path

import torch
from _timing import machine, table

import attnkit
from attnkit.cli.main import main as cli
from attnkit.data.multi30k import multi30k


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def score(hyps: list[str], refs: list[str]) -> dict:
    import sacrebleu

    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    lower = sacrebleu.metrics.BLEU(lowercase=True)
    return {"bleu": bleu.corpus_score(hyps, [refs]).score, "chrf": chrf.corpus_score(hyps, [refs]).score,
            "bleu_lc": lower.corpus_score(hyps, [refs]).score, "signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()), "lc_signature": str(lower.get_signature())}


def run(src: str, tgt: str, args, extra: list[str]) -> list[list]:
    out = Path(args.out) / f"translate-{src}-{tgt}"
    cmd = ["train", "translate", "--src", src, "--tgt", tgt, "--out", str(out), "--max-minutes", str(args.minutes),
           "--threads", str(args.threads), "--no-progress", *extra]
    print("attnkit " + " ".join(cmd), flush=True)
    t0, c0 = time.perf_counter(), cpu_seconds()
    if cli(cmd) != 0:
        sys.exit(f"training {src}->{tgt} failed")
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    result = json.loads((out / "result.json").read_text())
    print(f"{src}->{tgt}: {result['step']} steps, training {result['train_seconds'] / 60:.1f} min (wall, "
          f"whole command {wall / 60:.1f} min, process CPU {cpu / 60:.1f} min)", flush=True)
    tr = attnkit.load_pretrained(out)
    test = multi30k("test", src, tgt)
    rows = []
    for beams in (1, 5):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hyps = tr.translate(test.src, num_beams=beams)
        dt = time.perf_counter() - t0
        s = score(hyps, test.tgt)
        print(f"{src}->{tgt} {'greedy' if beams == 1 else f'beam {beams}'}: sacreBLEU {s['bleu']:.2f} "
              f"({s['signature']}), chrF {s['chrf']:.2f} ({s['chrf_signature']}), lower-cased BLEU {s['bleu_lc']:.2f} "
              f"({s['lc_signature']}), {dt:.1f} s", flush=True)
        rows.append([f"{src}->{tgt}", "greedy" if beams == 1 else f"beam {beams}", f"{s['bleu']:.2f}",
                     f"{s['chrf']:.2f}", f"{s['bleu_lc']:.2f}", f"{result['train_seconds'] / 60:.1f}",
                     f"{cpu / 60:.1f}", f"{dt:.1f}"])
    return rows


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--direction", choices=("de-en", "en-de", "both"), default="de-en")
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="runs/bench")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs = [("de", "en"), ("en", "de")] if args.direction == "both" else [tuple(args.direction.split("-"))]
    start = datetime.datetime.now(datetime.UTC)
    rows = [r for s, t in pairs for r in run(s, t, args, extra)]
    print(f"\n{start:%Y-%m-%d %H:%M} UTC, {machine()}")
    print(table(["direction", "decoding", "sacreBLEU", "chrF", "lower-cased BLEU", "train min (wall)",
                 "train CPU min", "decode s"], rows))


if __name__ == "__main__":
    main()
