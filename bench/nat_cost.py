"""What a one-pass CTC decoder of a given shape costs, before training it: a CTC run's weights cut to K decoder
layers (the first K) and its row set to R x S, timed against autoregressive greedy on the same engine.

    .venv/bin/python bench/nat_cost.py --ar RUN --ctc RUN --cuts 3:1.5,2:1.5,1:1.5,3:1.25,1:1.25,1:1.1 \\
        [--batch-sizes 64,32] [--threads 2] [--repeats 3] [--latency-sentences 100]

A CTC row's length is fixed by the source (ceil(R S) positions), and the decoder, the output layer and the best
labels run over every position whatever the weights learned, so a cut copy does the work that a trained model of
that shape does. Its translations mean nothing: no BLEU is printed. For each cut: throughput at each
--batch-sizes and latency at batch 1 (median over --latency-sentences test sentences, in blocks after a warm-up,
as bench/nat.py measures them), each as a ratio to AR greedy measured in the same run, interleaved; and the share
of the validation references (Multi30k val) that such a row cannot align: a CTC alignment of T tokens with r
adjacent repeats needs T + r positions, and the model can never write those references.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import commit, machine, table  # noqa: E402
from nat import latency, throughput  # noqa: E402

import attnkit  # noqa: E402
from attnkit.data.multi30k import multi30k  # noqa: E402
from attnkit.models.nat import ctc_row_lengths  # noqa: E402
from attnkit.models.nat_losses import ctc_feasible  # noqa: E402


def cuts(text: str) -> list[tuple[int, float]]:
    """'3:1.5,1:1.1' -> [(3, 1.5), (1, 1.1)]"""
    out = []
    for part in text.split(","):
        try:
            k, r = part.split(":")
            out.append((int(k), float(r)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--cuts: {part!r} is not LAYERS:UPSAMPLE (e.g. 2:1.25)") from None
    return out


def cut(tr, layers: int, upsample: float):
    """The translator ``tr`` of a CTC run with its decoder cut to its first ``layers`` layers and a row of
    ``upsample`` x S (the weights otherwise the same)."""
    cfg = tr.model.config
    have = cfg.transformer.num_decoder_layers
    if not 1 <= layers <= have:
        raise SystemExit(f"bench/nat_cost.py: --cuts asks for {layers} decoder layers; the run has {have}")
    new = dataclasses.replace(cfg, ctc_upsample=upsample,
                              transformer=dataclasses.replace(cfg.transformer, num_decoder_layers=layers))
    model = type(tr.model)(new)  # NATConfig validates upsample (a clear error outside [1, 16])
    drop = tuple(f"decoder.layers.{i}." for i in range(layers, have))
    model.load_state_dict({k: v for k, v in tr.model.state_dict().items() if not k.startswith(drop)})
    return type(tr)(model, tr.subwords, tr.meta)


def unalignable(tr, src: list[str], ref: list[str]) -> float:
    """The share (%) of references whose CTC alignment needs more positions than the row of their source
    (``ctc_feasible``, as training counts them)."""
    if not src:
        return 0.0
    rows = ctc_row_lengths(torch.tensor([len(tr.source_ids(s, "source")) for s in src]), tr.model.config)
    ids = [tr.subwords.encode(t) for t in ref]
    targets = torch.tensor([t + [-1] * (max(map(len, ids)) - len(t)) for t in ids])  # (N, L) padded with -1
    return 100.0 * float((~ctc_feasible(targets, torch.tensor([len(t) for t in ids]), rows)).float().mean())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ar", type=Path, required=True, help="autoregressive translation run (attnkit train translate)")
    p.add_argument("--ctc", type=Path, required=True, help="a NAT run trained with --nat-loss ctc: the weights cut")
    p.add_argument("--cuts", type=cuts, required=True, help="LAYERS:UPSAMPLE, comma-separated (3:1.5,1:1.1)")
    p.add_argument("--batch-sizes", default="64", help="throughput at these batch sizes, comma-separated")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3, help="rounds of the throughput measurement")
    p.add_argument("--latency-sentences", type=int, default=100)
    p.add_argument("--latency-block", type=int, default=10)
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--data-root", type=Path, default=None)
    p.add_argument("--limit", type=int, default=None, help="only the first N test sentences (quick checks)")
    args = p.parse_args()
    sizes = [int(x) for x in args.batch_sizes.split(",")]
    torch.set_num_threads(args.threads)
    ar, ctc = attnkit.load_pretrained(args.ar), attnkit.load_pretrained(args.ctc)
    if getattr(ctc.model.config, "nat_loss", None) != "ctc":
        raise SystemExit(f"bench/nat_cost.py: --ctc {args.ctc} is not a NAT run trained with CTC")
    test = multi30k(args.split, "de", "en", args.data_root, limit=args.limit)
    val = multi30k("val", "de", "en", args.data_root)
    names = [f"{k} layer{'s' * (k > 1)}, row {r:g} x S" for k, r in args.cuts]
    contenders = [("AR greedy", ar, {})] + [(n, cut(ctc, k, r), {}) for n, (k, r) in zip(names, args.cuts)]
    print(f"# bench/nat_cost.py, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit()}")
    print(f"# {machine()}; float32; load average at start {os.getloadavg()[0]:.2f}")
    print(f"# {args.split} De->En, {len(test.src)} sentences; AR {args.ar}; the weights of {args.ctc} "
          f"({ctc.model.config.transformer.num_decoder_layers} decoder layers, row "
          f"{ctc.model.config.ctc_upsample:g} x S) cut", flush=True)
    _, batch_s = throughput(contenders, test.src, sizes, args.repeats)
    n_lat = min(args.latency_sentences, len(test.src))
    step = max(1, len(test.src) // n_lat)
    lat = latency(contenders, test.src[::step][:n_lat], test.src[1::step][:n_lat], args.latency_block)
    base_tp = {n: len(test.src) / statistics.median(batch_s["AR greedy", n]) for n in sizes}
    base_lat = statistics.median(lat["AR greedy"])
    rows = []
    for name, tr, _ in contenders:
        tps = [len(test.src) / statistics.median(batch_s[name, n]) for n in sizes]
        ms = statistics.median(lat[name])
        share = "-" if tr is ar else f"{unalignable(tr, val.src, val.tgt):.2f}"
        rows.append([name, share, f"{ms * 1e3:.2f}", f"{base_lat / ms:.2f}x",
                     *[c for n, tp in zip(sizes, tps) for c in (f"{tp:.1f}", f"{tp / base_tp[n]:.2f}x")]])
    print(table(["decoder", "val refs the row cannot align %", "batch 1 ms", "vs AR greedy",
                 *[h for n in sizes for h in (f"batch {n} sentences/s", "vs AR greedy")]], rows))
    print(f"# throughput: median of {args.repeats} rounds over {len(test.src)} sentences; latency: median over "
          f"{n_lat} sentences, batch 1; load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
