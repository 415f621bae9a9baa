"""Non-autoregressive vs autoregressive translation on Multi30k test_2016_flickr De->En, in one run.

    flock /tmp/attnkit-heavy.lock .venv/bin/python bench/nat.py --ar runs/de-en --nat runs/de-en-nat \\
        [--nat runs/de-en-glat --nat runs/de-en-ctc] [--nat-raw runs/de-en-nat-raw] [--blank-penalty 0,0,2] \\
        [--threads 2] [--latency-sentences 100] [--latency-block 10] [--repeats 3] [--batch-sizes 64,32] [--no-beam] \\
        [--phases] [--dtype bfloat16]

Rows: the autoregressive run (greedy; beam search, --beam, unless --no-beam), then each --nat run by how it was
trained (--nat-loss): a Mask-Predict run's one pass (the classifier's best length only, and with
--length-candidates) and Mask-Predict at 4 and 10 iterations; a GLAT run's one pass (1 and --length-candidates
lengths); a CTC run's one pass (a row of upsample x S positions, collapsed). With --nat-raw, runs trained
without distillation (their one pass; Mask-Predict 10 of a Mask-Predict run). Columns:

- sacreBLEU and chrF on the whole test set (1000 sentences), decoded in batches of the first --batch-sizes;
- latency at batch 1: the median time to translate one sentence, over --latency-sentences test
  sentences, interleaved in blocks: each row translates a block of --latency-block sentences, then
  the next row the same block, so load hits all alike. Before its block each row translates the
  block's neighbours (the next sentence of the test set after each), unmeasured: it then runs with its
  weights back in cache after the other rows ran, as a server running one model would (without this,
  one-pass NAT's first three or four sentences of a block still read weights from memory);
- throughput at each of --batch-sizes (default 64): sentences per second over the whole test set, the
  median of --repeats interleaved rounds.

A last line gives AR greedy and the first NAT run's one pass alternating sentence by sentence: the two models'
weights together exceed the last-level cache of a small machine, so each sentence then starts from memory, which
costs a one-pass decoder (every weight read once) more than a step-by-step one (weights re-read from
cache at every step after the first).

With --phases, a second table splits batch-1 AR greedy and that one pass into their parts (the median
per sentence of each; the shared encoder bounds what any decoder speed-up can give).

A line gives the two's work: the median multiply-adds of their matrix products per sentence and the rate
they ran at (multiply-adds over latency, median per sentence), next to the CPU's peak in the same dtype
(bench/cpu_peak.py's probe of its FMA / AVX512-BF16 units). One NAT pass does about as many multiply-adds
as greedy decoding; its speed-up is how much faster products over a dozen rows run than greedy's steps of
one row.

Ratios are against AR greedy measured in the same run. Times include BPE encoding and decoding of
the text on both sides. Decoding runs on --threads torch threads, every run's weights in --dtype
(float32, as trained, or bfloat16).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import commit, machine, table  # noqa: E402
from cpu_peak import peak_gflops  # noqa: E402

import attnkit  # noqa: E402
from attnkit.data.multi30k import multi30k  # noqa: E402
from attnkit.models.nat import ctc_row_length  # noqa: E402

LOSS_NAMES = {"mask-predict": "NAT", "glat": "GLAT", "ctc": "CTC"}


def nat_rows(tr, k: int, prefix: str = "", blank_penalty: float = 0.0, ar_layers: int | None = None
             ) -> list[tuple[str, object, dict]]:
    """The rows of one NAT run, by how it was trained: CTC one pass (with ``blank_penalty``, chosen on the
    validation set); GLAT one pass with 1 and k lengths; Mask-Predict's one pass (1 and k lengths) and 4 and
    10 iterations. A decoder of other than ``ar_layers`` layers is named."""
    loss, layers = tr.model.config.nat_loss, tr.model.config.transformer.num_decoder_layers
    name = prefix + LOSS_NAMES[loss] + (f" ({layers}-layer decoder)" if ar_layers not in (None, layers) else "")
    if loss == "ctc":  # the row in the name: two CTC runs are two rows
        pen = f", blank penalty {blank_penalty:g}" if blank_penalty else ""
        return [(f"{name} one pass ({tr.model.config.ctc_upsample:g} x S){pen}", tr,
                 {"blank_penalty": blank_penalty} if blank_penalty else {})]
    out = [(f"{name} one pass, 1 length", tr, {"iterations": 1, "length_candidates": 1}),
           (f"{name} one pass, {k} lengths", tr, {"iterations": 1, "length_candidates": k})]
    if loss == "mask-predict":
        out += [(f"Mask-Predict 4 it., {k} lengths", tr, {"iterations": 4, "length_candidates": k}),
                (f"Mask-Predict 10 it., {k} lengths", tr, {"iterations": 10, "length_candidates": k})]
    return out


def penalties(text: str) -> list[float]:
    """--blank-penalty: "2" or "2,1.5" -> [2.0] or [2.0, 1.5]."""
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be numbers separated by commas, got {text!r}") from None


def per_run(values: list[float], runs: list, option: str, runs_option: str) -> list[float]:
    """One value for every run, or one per run -> one per run; else a one-line error naming ``option``."""
    if len(values) == 1:
        return values * len(runs)
    if len(values) != len(runs):
        raise SystemExit(f"bench/nat.py: {option} gives {len(values)} values for {len(runs)} {runs_option} runs: "
                         "give one, or one per run")
    return values


def rows(args) -> list[tuple[str, object, dict]]:
    pens = per_run(args.blank_penalty, args.nat, "--blank-penalty", "--nat")
    raw = args.blank_penalty[:1] if args.raw_blank_penalty is None else args.raw_blank_penalty
    raw_pens = per_run(raw, args.nat_raw or [], "--raw-blank-penalty", "--nat-raw")
    dtype = getattr(torch, args.dtype)
    ar = attnkit.load_pretrained(args.ar, dtype=dtype)
    nats = [attnkit.load_pretrained(run, dtype=dtype) for run in args.nat]
    raws = [attnkit.load_pretrained(run, dtype=dtype) for run in args.nat_raw or ()]
    if ar.decoding != "ar" or any(tr.decoding != "nat" for tr in nats + raws):
        raise SystemExit("bench/nat.py: --ar must be an autoregressive run and --nat, --nat-raw NAT runs")
    k = args.length_candidates
    out = [("AR greedy", ar, {})] + ([] if args.no_beam else [(f"AR beam {args.beam}", ar, {"num_beams": args.beam})])
    layers = ar.model.config.transformer.num_decoder_layers
    for tr, pen in zip(nats, pens):
        out += nat_rows(tr, k, blank_penalty=pen, ar_layers=layers)
    for tr, pen in zip(raws, raw_pens):  # no distillation: the one pass (and Mask-Predict 10 of a Mask-Predict run)
        out += [r for r in nat_rows(tr, k, "no distillation: ", pen, layers) if "1 length" in r[0]
                or "10 it." in r[0] or "CTC one pass" in r[0]]
    if len({name for name, _, _ in out}) < len(out):
        raise SystemExit("bench/nat.py: two rows of the same name (the same kind of run twice): give runs that "
                         "differ")
    return out


def seconds(tr, text: str, kw: dict) -> float:
    """Wall time of translating one sentence."""
    t0 = time.perf_counter()
    tr.translate([text], **kw)
    return time.perf_counter() - t0


PARTS = {"ar": ("encode", "decode_step"),
         "nat": ("encode", "length_candidates", "first_pass", "decode_parallel", "output_logits")}
# parts a call of the first makes: its own time is the rest
INSIDE = {"first_pass": ("encode", "length_candidates", "decode_parallel", "output_logits")}
OWN = {"first_pass": "decoder, output, best tokens"}  # what that rest is
WHOLE = {"first_pass": "first pass, one native call (encoder to best tokens)"}  # when it makes none of them


def _timed(f, part: str, spent: dict[str, float]):
    """f, with the time of each call added to spent[part]."""
    def call(*a, **k):
        t0 = time.perf_counter()
        out = f(*a, **k)
        if out is not None or part != "first_pass":  # a first pass declined (no native layers): the others run
            spent[part] = spent.get(part, 0.0) + time.perf_counter() - t0
        return out
    return call


def one_pass_pair(contenders) -> list[tuple[str, object, dict]]:
    """AR greedy and the first NAT run's one pass (one length)."""
    nat = [r for r in contenders if r[1].decoding == "nat" and ("1 length" in r[0] or "CTC one pass" in r[0])]
    return [contenders[0], *nat[:1]]


def phases(contenders, sample: list[str], warm: list[str], block: int) -> list[list[str]]:
    """Batch-1 AR greedy and one-pass NAT split into their parts: the median per sentence of the time in each
    method of the inference copy (every call timed), and of the whole translation; blocks and warm-up as the latency."""
    pair = one_pass_pair(contenders)
    spent: dict[str, float] = {}
    per: dict[str, dict[str, list[float]]] = {name: {} for name, _, _ in pair}
    for _, tr, _ in pair:  # instance attributes: the classes' methods stay as they are
        for part in PARTS[tr.decoding]:
            setattr(tr.decoder, part, _timed(getattr(tr.decoder, part), part, spent))
    for i in range(0, len(sample), block):
        for name, tr, kw in pair:
            for text in warm[i:i + block]:
                tr.translate([text], **kw)
            for text in sample[i:i + block]:
                spent.clear()
                total = seconds(tr, text, kw)
                for outer, inner in INSIDE.items():
                    if outer in spent:
                        own = OWN[outer] if any(part in spent for part in inner) else WHOLE[outer]
                        spent[own] = spent.pop(outer) - sum(spent.get(part, 0.0) for part in inner)
                for part, t in [*spent.items(), ("whole translation", total),
                                ("rest (text, glue)", total - sum(spent.values()))]:
                    per[name].setdefault(part, []).append(t)
    for _, tr, _ in pair:
        for part in PARTS[tr.decoding]:
            delattr(tr.decoder, part)
    return [[name, part, f"{1e3 * statistics.median(times):.3f}"]
            for name, parts in per.items() for part, times in parts.items()]


def multiply_adds(tr, text: str, kw: dict) -> float:
    """The matrix products' multiply-adds of translating one sentence (attention's included; norms, softmax
    and the length classifier left out): the encoder over S tokens, every layer's cross K, V, then one NAT
    pass over T positions, or AR's steps, each over every layer and the output layer."""
    tc, vocab = tr.model.config.transformer, tr.model.config.tgt_vocab_size
    d, f, le, ld = tc.d_model, tc.d_ff, tc.num_encoder_layers, tc.num_decoder_layers
    ids = torch.tensor([tr.source_ids(text)])
    s, n = ids.shape[1], tr.generate(ids, None, **kw).sequences.shape[1]
    work = le * (s * (4 * d * d + 2 * d * f) + 2 * s * s * d) + ld * s * 2 * d * d
    layer = 6 * d * d + 2 * d * f  # a decoder position: Q, K, V, O of self-attention, Q, O of cross, feed-forward
    if tr.decoding == "nat":  # sequences: start, T tokens, END; CTC writes a row of upsample x S positions
        t = ctc_row_length(s, tr.model.config) if tr.ctc else n - 2
        return work + ld * (t * layer + 2 * t * t * d + 2 * t * s * d) + t * d * vocab
    return work + sum(ld * (layer + 2 * j * d + 2 * s * d) + d * vocab for j in range(1, n))  # n - 1 steps


def throughput(contenders, src: list[str], sizes: list[int], repeats: int):
    """Every row translates the whole set at each batch size, interleaved rounds -> (translations at the first
    size, {(row, size): seconds of each round})."""
    hyps: dict[str, list[str]] = {}
    batch_s: dict[tuple[str, int], list[float]] = {(name, n): [] for name, _, _ in contenders for n in sizes}
    for _, tr, kw in contenders:  # warm-up
        tr.translate(src[:sizes[0]], batch_size=sizes[0], **kw)
    for r in range(repeats):
        for n in sizes:
            for name, tr, kw in contenders:
                t0 = time.perf_counter()
                out = tr.translate(src, batch_size=n, **kw)
                batch_s[name, n].append(time.perf_counter() - t0)
                hyps.setdefault(name, out)
        print(f"# throughput round {r + 1}/{repeats} done", file=sys.stderr, flush=True)
    return hyps, batch_s


def latency(contenders, sample: list[str], warm: list[str], block: int) -> dict[str, list[float]]:
    """Batch 1: seconds per sentence, every block of sentences through every row in turn, each row after
    translating the block's neighbours (unmeasured)."""
    lat: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
    for i in range(0, len(sample), block):
        for name, tr, kw in contenders:
            for text in warm[i:i + block]:  # the weights back in cache after the other rows ran
                tr.translate([text], **kw)
            for text in sample[i:i + block]:
                lat[name].append(seconds(tr, text, kw))
    return lat


def report(contenders, hyps, batch_s, lat, test, sizes: list[int], metric) -> list[list[str]]:
    """The table's rows: BLEU, chrF, batch-1 latency and each batch size's throughput, with ratios to AR greedy."""
    import sacrebleu

    base_lat = statistics.median(lat["AR greedy"])
    base_tp = {n: len(test.src) / statistics.median(batch_s["AR greedy", n]) for n in sizes}
    out = []
    for name, _, _ in contenders:
        bleu = metric.corpus_score(hyps[name], [test.tgt])
        chrf = sacrebleu.metrics.CHRF().corpus_score(hyps[name], [test.tgt])
        ms = 1e3 * statistics.median(lat[name])
        tps = [len(test.src) / statistics.median(batch_s[name, n]) for n in sizes]
        out.append([name, f"{bleu.score:.2f}", f"{chrf.score:.2f}", f"{ms:.2f}", f"{base_lat * 1e3 / ms:.2f}x",
                    *[c for tp, n in zip(tps, sizes) for c in (f"{tp:.1f}", f"{tp / base_tp[n]:.2f}x")]])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ar", type=Path, required=True, help="autoregressive translation run (attnkit train translate)")
    p.add_argument("--nat", type=Path, required=True, action="append",
                   help="NAT run (--decoder nat --teacher AR), any --nat-loss; may be repeated")
    p.add_argument("--nat-raw", type=Path, default=None, action="append",
                   help="NAT run trained on the corpus itself (no teacher); may be repeated")
    p.add_argument("--batch-sizes", default="64", help="throughput at these batch sizes, comma-separated (BLEU "
                   "from the first)")
    p.add_argument("--no-beam", action="store_true", help="leave out the AR beam-search row")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--data-root", type=Path, default=None)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--length-candidates", type=int, default=3)
    p.add_argument("--blank-penalty", type=penalties, default=[0.0],
                   help="CTC runs: taken off the blank's logit (choose it on the validation set; default 0): one "
                   "value for every --nat run, or one per run, comma-separated (2,1.5)")
    p.add_argument("--raw-blank-penalty", type=penalties, default=None,
                   help="the same for the --nat-raw runs, one value or one per run (chosen on the validation set "
                   "for them; default: --blank-penalty's first)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="every run's weights in this dtype (default float32, as trained)")
    p.add_argument("--latency-sentences", type=int, default=100)
    p.add_argument("--latency-block", type=int, default=10, help="sentences each row translates in turn")
    p.add_argument("--repeats", type=int, default=3, help="rounds of the batch-64 throughput measurement")
    p.add_argument("--limit", type=int, default=None, help="only the first N test sentences (quick checks)")
    p.add_argument("--phases", action="store_true", help="also split batch-1 AR greedy and one-pass NAT into parts")
    args = p.parse_args()
    if args.latency_block < 1 or args.latency_sentences < 1:
        p.error("--latency-block and --latency-sentences must be >= 1")
    torch.set_num_threads(args.threads)
    import sacrebleu

    test = multi30k(args.split, "de", "en", args.data_root, limit=args.limit)
    contenders = rows(args)
    print(f"# bench/nat.py, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit()}")
    print(f"# {machine()}; weights in {args.dtype}; load average at start {os.getloadavg()[0]:.2f}")
    print(f"# {args.split} De->En, {len(test.src)} sentences; AR {args.ar}, NAT {', '.join(map(str, args.nat))}"
          + (f", NAT without distillation {', '.join(map(str, args.nat_raw))}" if args.nat_raw else ""), flush=True)

    sizes = [int(x) for x in args.batch_sizes.split(",")]
    hyps, batch_s = throughput(contenders, test.src, sizes, args.repeats)
    n_lat = min(args.latency_sentences, len(test.src))
    step = max(1, len(test.src) // n_lat)
    sample = test.src[::step][:n_lat]
    warm = test.src[1::step][:n_lat]  # each sampled sentence's neighbour: warm-up, never measured
    lat = latency(contenders, sample, warm, args.latency_block)
    pair = one_pass_pair(contenders)
    alternating: dict[str, list[float]] = {name: [] for name, _, _ in pair}
    for text in sample:
        for name, tr, kw in pair:
            alternating[name].append(seconds(tr, text, kw))

    metric = sacrebleu.metrics.BLEU()
    print(table(["decoding", "BLEU", "chrF", "batch 1 ms/sentence", "speed-up vs AR greedy",
                 *[h for size in sizes for h in (f"batch {size} sentences/s", "vs AR greedy")]],
                report(contenders, hyps, batch_s, lat, test, sizes, metric)))
    ar_ms, nat_ms = (1e3 * statistics.median(v) for v in alternating.values())
    print(f"# alternating sentence by sentence (weights not in cache): AR greedy {ar_ms:.1f} ms, {pair[1][0]} "
          f"{nat_ms:.1f} ms = {ar_ms / nat_ms:.2f}x")
    print(f"# latency: median over {n_lat} sentences (every {step}th) in blocks of {args.latency_block}, "
          f"each after a warm-up on its neighbours, batch 1; "
          f"throughput: median of {args.repeats} "
          f"rounds over {len(test.src)} sentences, batch {', '.join(map(str, sizes))} (BLEU at batch {sizes[0]}); "
          f"load average at end {os.getloadavg()[0]:.2f}")
    print(f"# sacreBLEU signature: {metric.get_signature()}")
    rates = []
    for name, tr, kw in pair:  # the latency sample's work, and the rate it ran at
        macs = [multiply_adds(tr, text, kw) for text in sample]
        rates.append(f"{name} {statistics.median(macs) / 1e6:.0f} M multiply-adds per sentence, "
                     f"{statistics.median(m / t for m, t in zip(macs, lat[name])) / 1e9:.0f} G/s")
    try:  # bench/cpu_peak.py's probe: the CPU's multiply-adds per second over --threads threads (FLOPs / 2)
        ceiling = f"the CPU's peak: {peak_gflops(args.threads)[args.dtype] / 2:.0f} G/s (bench/cpu_peak.py's probe)"
    except (SystemExit, KeyError) as e:
        ceiling = f"the CPU's peak not measured ({e or 'no AVX512-BF16'})"
    print(f"# work (median over the latency sample): {'; '.join(rates)}; {ceiling}")
    if args.phases:
        parts = phases(contenders, sample, warm, args.latency_block)
        print(table(["decoding", "part", "ms / sentence (median)"], parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
