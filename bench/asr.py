"""Speech recognition of connected digits: decoding latency, long inputs, truncated vs full attention, streaming.

    flock /tmp/attnkit-heavy.lock .venv/bin/python bench/asr.py --run runs/asr [--full-run runs/asr-full] \\
        [--streaming-run runs/asr-stream] [--threads 2] [--utterances 100] [--repeats 5] [--parts]

Prints the machine, the load average before and after, and:

1. latency at batch 1 on --utterances utterances of the recordings-held-out test set (features, encoder and
   decoding of one utterance, the median over utterances, each the best of --repeats, the modes interleaved
   utterance by utterance): CTC one pass, greedy, attention beam 5, beam 5 + CTC; ratios against CTC one pass;
   then CTC one pass and beam 5 with the encoder on the model's reference modules instead of the inference engine
   (``attnkit.inference.AsrEngine``, which ``transcribe`` runs);
2. a 10-second recording (16 digits of the test recordings, written to a WAV file and read back, as ``attnkit
   transcribe`` does): the median of --repeats transcriptions with the default decoding and with CTC one pass;
3. truncated vs full attention on 30-second inputs: the encoder (front end included) of the run's model with
   its window and with the same weights and full attention (backends chosen automatically), one 30 s input
   (3000 frames: 750 steps at subsample 4, 375 at 8), the median of --repeats; with --full-run, that run's encoder too;
4. with --streaming-run: the latency from the end of each digit to its label in streaming CTC (chunks of
   --chunk encoder steps of 40 or 80 ms; ``attnkit.tasks.asr_stream``) on the first --utterances test utterances.

With --parts, first the parts of the batch-1 path on the same utterances (each the best of --repeats, the
median over utterances, in inference mode): log-mel features, the normalisation and front end, the engine's
``encode_frames`` (front end, encoder, CTC head), the encoder and CTC head alone (the difference, per utterance),
CTC's collapse.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import commit, machine, table  # noqa: E402

import attnkit  # noqa: E402
from attnkit.data.audio import log_mel  # noqa: E402
from attnkit.data.digits import DigitsConfig, DigitUtterances, pools, write_wav  # noqa: E402
from attnkit.data.fsdd import load_fsdd  # noqa: E402
from attnkit.generation.ctc import ctc_greedy  # noqa: E402
from attnkit.models.asr import AsrModel  # noqa: E402
from attnkit.tasks import asr_sets  # noqa: E402
from attnkit.tasks.asr_stream import latency_lines  # noqa: E402
from attnkit.tasks.transcriber import digit_errors  # noqa: E402

MODES = {"CTC one pass": dict(ctc=True), "greedy": dict(beam=1, ctc_weight=0.0),
         "beam 5": dict(beam=5, ctc_weight=0.0), "beam 5 + CTC": dict(beam=5)}


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def latency(tr, utterances, repeats: int) -> list[list[object]]:
    ref = copy.copy(tr)
    ref.encoder = tr.model  # the encoder on the reference modules, not the inference engine
    runs = [(name, tr, kw) for name, kw in MODES.items()]
    runs += [(f"{name}, reference encoder", ref, MODES[name]) for name in ("CTC one pass", "beam 5")]
    per = {name: [] for name, _, _ in runs}
    for u in utterances:  # modes interleaved utterance by utterance: load hits all alike
        for name, t, kw in runs:
            per[name].append(best_of(lambda u=u, t=t, kw=kw: t.decode([log_mel(u.samples, t.features)], **kw),
                                     repeats))
    ctc = statistics.median(per["CTC one pass"])
    return [[name, 1000 * statistics.median(v), statistics.median(v) / ctc] for name, v in per.items()]


def _parts_of(tr, samples, repeats: int) -> list[float]:
    """One utterance's log-mel, front end, ``encode_frames`` and CTC collapse: seconds, each the best of repeats."""
    e = tr.encoder  # the inference engine, what ``decode`` runs
    f = log_mel(samples, tr.features)
    x, n = f[None], torch.tensor([f.shape[0]])
    enc = e.encode_frames(x, n, ctc_only=True)  # the CTC one pass's: with ctc_layer k, its first k layers
    fns = (lambda: log_mel(samples, tr.features), lambda: e.front(x, n),
           lambda: e.encode_frames(x, n, ctc_only=True),
           lambda: ctc_greedy(enc.ctc_log_probs, enc.lengths))
    return [best_of(fn, repeats) for fn in fns]


@torch.inference_mode()
def parts(tr, utterances, repeats: int) -> list[list[object]]:
    """The batch-1 path's parts (see the module doc), ms: the median over utterances."""
    per = {k: [] for k in ("log-mel features", "normalisation + front end", "encode_frames",
                           "encoder (its first ctc_layers) + CTC head (encode_frames - front end)", "CTC collapse")}
    for u in utterances:
        mel, front, enc, ctc = _parts_of(tr, u.samples, repeats)
        for k, v in zip(per, (mel, front, enc, enc - front, ctc)):
            per[k].append(v)
    return [[k, 1000 * statistics.median(v)] for k, v in per.items()]


def ten_seconds(tr, recs, repeats: int) -> list[list[object]]:
    """The first utterance of 16 test-recording digits that lasts 10 +- 0.25 s."""
    cfg = DigitsConfig(min_digits=16, max_digits=16, pause_ms=(150, 400))
    u = next(u for u in DigitUtterances(pools(recs)["test"], 1000, 3, cfg) if abs(len(u.samples) - 80000) <= 2000)
    with tempfile.TemporaryDirectory() as d:
        path = write_wav(Path(d) / "ten.wav", u.samples, cfg.sample_rate)
        rows = []
        for name, kw in (("default (beam 5 + CTC)", {}), ("CTC one pass", dict(ctc=True))):
            tr.transcribe([str(path)], **kw)
            times = [best_of(lambda kw=kw: tr.transcribe([str(path)], **kw), 1) for _ in range(repeats)]
            got = tr.transcribe([str(path)], **kw)[0]
            errors = sum(digit_errors(list(u.digits), [int(d) for d in got.split()]))
            rows.append([name, len(u.samples) / cfg.sample_rate, 1000 * statistics.median(times),
                         f"{errors} digit errors in {len(u.digits)}"])
    return rows


@torch.no_grad()
def windows(model: AsrModel, full_run, repeats: int) -> list[list[object]]:
    x = torch.randn(1, 3000, model.config.n_mels)
    n = torch.tensor([3000])
    models = {f"window {model.config.window}": model}
    same = AsrModel(model.config.replace(window=None)).eval()
    same.load_state_dict(model.state_dict())
    models["full (same weights)"] = same
    if full_run is not None:
        models["full (--full-run)"] = attnkit.load_pretrained(full_run).model
    times = {k: [] for k in models}
    for m in models.values():
        m.encode_frames(x, n)
    for _ in range(repeats):
        for k, m in models.items():
            times[k].append(best_of(lambda m=m: m.encode_frames(x, n), 1))
    ref = statistics.median(times[f"window {model.config.window}"])
    return [[k, 1000 * statistics.median(v), statistics.median(v) / ref] for k, v in times.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, default=Path("runs/asr"), help="a run of attnkit train asr")
    ap.add_argument("--full-run", type=Path, default=None, help="a run trained with --window full")
    ap.add_argument("--streaming-run", type=Path, default=None, help="a run trained with --streaming")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--utterances", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--parts", action="store_true", help="first the parts of the batch-1 path (see above)")
    ap.add_argument("--chunk", type=int, default=4,
                    help="streaming: encoder steps (40 or 80 ms each, by the run's subsample) per chunk")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{machine()}; commit {commit()}; {load()}")
    tr = attnkit.load_pretrained(args.run)
    meta = tr.meta
    recs = load_fsdd()
    test = asr_sets.make_sets(meta, ("recordings",))["recordings"]
    utts = [test[i] for i in range(min(args.utterances, len(test)))]
    if args.parts:
        print(f"\nthe batch-1 path's parts, {len(utts)} test utterances (the best of {args.repeats} each, median over "
              "utterances)")
        print(table(["part", "ms"], parts(tr, utts, args.repeats)))
    print(f"\n1. latency at batch 1, {len(utts)} test utterances ({args.run}; the best of {args.repeats} each, "
          f"median over utterances)")
    print(table(["decoding", "ms", "x CTC one pass"], latency(tr, utts, args.repeats)))
    print(f"\n2. a 10-second recording, median of {args.repeats} transcriptions (attnkit transcribe's path: WAV "
          "read, resampled if needed, features, decoding)")
    print(table(["decoding", "seconds of sound", "ms", "result"], ten_seconds(tr, recs, args.repeats)))
    steps = int(tr.model.out_lengths(torch.tensor(3000)))
    print(f"\n3. the encoder on one 30-second input (3000 frames, {steps} steps), median of {args.repeats}")
    print(table(["attention", "ms", "x window"], windows(tr.model, args.full_run, args.repeats)))
    if args.streaming_run is not None:
        st = attnkit.load_pretrained(args.streaming_run)
        sutts = asr_sets.make_sets(st.meta, ("recordings",))["recordings"]
        print(f"\n4. streaming ({args.streaming_run}, window {st.model.config.window})")
        for line in latency_lines(st.model, st.features, [sutts[i] for i in range(min(args.utterances,
                                                                                        len(sutts)))], args.chunk):
            print(line)
    print(f"\n{load()}")


if __name__ == "__main__":
    main()
