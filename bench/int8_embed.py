"""int8 sentence embeddings against float32: all-MiniLM-L6-v2 on the sentences of ``bench/embed.py``.

    python bench/int8_embed.py [--n 2000] [--repeats 3] [--threads 2] [--no-time]

Prints the cosine of attnkit int8 to attnkit float32 over the sentences (mean and worst), and, unless
``--no-time``, the seconds of each (interleaved repeats, medians) and their ratio. The int8 path is the one
``encode(dtype="int8")`` takes on this machine (said on stderr: fbgemm, or the exact reference).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _timing import machine, time_once  # noqa: E402
from embed import make_sentences  # noqa: E402

from attnkit.pretrained import load_pretrained  # noqa: E402


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own choice)")
    ap.add_argument("--no-time", action="store_true", help="only the cosines")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    enc = load_pretrained("all-MiniLM-L6-v2")
    texts = make_sentences(enc.tokenizer.get_vocab(), args.n, 0)
    runs = {"float32": lambda: enc.encode(texts, batch_size=args.batch_size),
            "int8": lambda: enc.encode(texts, batch_size=args.batch_size, dtype="int8")}
    out = {k: fn() for k, fn in runs.items()}  # warm-up, and the vectors compared
    cos = F.cosine_similarity(out["int8"], out["float32"], dim=1)
    print(f"all-MiniLM-L6-v2, {args.n} sentences: cosine int8 to float32 mean {cos.mean():.6f}, "
          f"worst {cos.min():.6f} (sentence {int(cos.argmin())})")
    result = {"cos_mean": float(cos.mean()), "cos_min": float(cos.min())}
    if not args.no_time:
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(args.repeats):
            for k, fn in runs.items():
                times[k].append(time_once(fn, 1))
        med = {k: statistics.median(v) for k, v in times.items()}
        for k in runs:
            print(f"{k:8s} median {med[k]:.2f} s ({args.n / med[k]:.0f} sentences/s; runs "
                  f"{', '.join(f'{t:.2f}' for t in times[k])})")
        print(f"int8 / float32 speed: {med['float32'] / med['int8']:.2f}x")
        result.update(med)
    print(f"machine: {machine()}")
    return result


if __name__ == "__main__":
    main()
