"""``attnkit transcribe RUN a.wav [b.wav ...] [--ctc] [--beam K] [--ctc-weight W] [--attention DIR] [--as-is]``:
one line per file, the digits separated by spaces (``7 0 9 1``; with several files ``NAME<TAB>7 0 9 1``); a file
that cannot be read is a one-line error naming it (the others are still transcribed, the exit status is 1). On stderr,
while it reads, prepares and decodes: a progress bar on a terminal, else a plain line at least every 10 s.

``attnkit asr generate --out DIR --seed S --n N``: connected-digit utterances as WAVs + ``transcripts.tsv``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..nn.limits import SEED, floats, ints
from ..outputs import out_folder
from ..train.checkpoint import CheckpointError, load_meta
from .options import (
    add_count_progress_option,
    add_figures_option,
    add_threads_option,
    out_path,
    progress_to,
    set_threads,
)


def open_transcriber(path: Path, which: str = "best"):
    """The Transcriber of a speech recognition run; a one-line error for another task's run."""
    from .evaluate import open_checkpoint

    folder, meta = load_meta(path, which=which)
    if meta.get("task") != "asr":
        raise CheckpointError(f"transcribe: {folder} is a {meta.get('task')!r} run, not a speech recognition run "
                              "(made by `attnkit train asr`)")
    return open_checkpoint(path, which)[3]


def write_attention(tr, samples, name: str, k: int, out_dir: Path, text: str, how: str,
                    figures: str = "both", as_is: bool = False) -> list[Path]:
    """The cross-attention PNG over the sound and the lecture page of one recording: the decoder reading ``text``,
    the transcript printed, which the decoding ``how`` wrote; ``figures``: "png", "html" (the page) or "both"."""
    from ..viz.speech_alignment import speech_cross_attention_png

    digits = [int(d) for d in text.split()]
    if figures == "png":
        page, al = None, tr.attend(samples, digits, as_is=as_is)
    else:
        page, al = tr.lecture(samples, out_dir / f"cross_attention_{k}_lecture.html", digits=digits,
                              title=f"cross-attention over the sound, step by step: {name}: "
                                    f"{text or '(no digits)'} ({how})", as_is=as_is)
    if figures == "html":
        return [page]
    png = speech_cross_attention_png(al.frames, al.weights, al.labels, out_dir / f"cross_attention_{k}.png",
                                     frames_per_step=al.step_frames,
                                     title=f"{name}: {text or '(no digits)'} ({how})")
    return [png] + ([page] if page else [])


def run_transcribe(args) -> int:
    from ..data.sound import read_audio
    from ..train.progress import counter

    if args.ctc and (args.beam is not None or args.ctc_weight is not None):
        raise ValueError("transcribe: --ctc (CTC one pass) takes no --beam or --ctc-weight")
    if args.attention is not None:  # before the work: a file there is refused now, not after the transcripts
        out_folder(args.attention, "transcribe: --attention")
    set_threads(args)
    tr = open_transcriber(args.checkpoint, args.which)
    audio, failed, progress = {}, 0, progress_to(args)
    tick = counter("transcribe: reading", len(args.files), "files", progress)
    for f in args.files:
        try:
            audio[f] = read_audio(f, tr.rate)
        except ValueError as e:
            print(f"attnkit: error: {e}", file=sys.stderr)
            failed += 1
        tick.update()
    tick.close()
    names = list(audio)
    texts = tr.transcribe_arrays([audio[f] for f in names], as_is=args.as_is, ctc=args.ctc, beam=args.beam,
                                 ctc_weight=args.ctc_weight, progress=progress) if names else []
    for f, text in zip(names, texts):
        print(f"{f}\t{text}" if len(args.files) > 1 else text)
    if args.attention is not None:
        how = tr.decoding(ctc=args.ctc, beam=args.beam, ctc_weight=args.ctc_weight)
        if args.ctc:  # CTC labels frames; it has no attention over them to draw
            print("transcribe: CTC one pass records no attention; the maps show the decoder reading its transcript",
                  file=sys.stderr)
            how += "; drawn: the decoder reading it"
        for k, f in enumerate(names):
            for p in write_attention(tr, audio[f], f, k, args.attention, texts[k], how, args.figures, args.as_is):
                print(f"wrote {p}", file=sys.stderr)
    return 1 if failed else 0


def run_generate(args) -> int:
    from ..data.digits import TSV, DigitsConfig, DigitUtterances, pools, write_set
    from ..data.fsdd import load_fsdd

    out = Path(args.out)
    if (out / TSV).exists() and not args.overwrite:
        raise ValueError(f"asr generate: {out / TSV} exists; pass --overwrite to replace it")
    cfg = DigitsConfig(min_digits=args.min_digits, max_digits=args.max_digits)
    pool = pools(load_fsdd(args.data, download=args.download, root=args.data_dir), args.holdout_speaker)
    if args.pool == "speaker" and args.holdout_speaker is None:
        raise ValueError("asr generate: --pool speaker needs --holdout-speaker NAME")
    utts = DigitUtterances(pool["test_speaker" if args.pool == "speaker" else args.pool], args.n, args.seed, cfg)
    tsv = write_set(utts, out)
    seconds = sum(len(u.samples) for u in utts) / cfg.sample_rate
    print(f"wrote {len(utts)} utterances ({seconds:.1f} s of audio, {sum(len(u.digits) for u in utts)} digits) "
          f"and {tsv}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("transcribe", help="transcribe WAV files of spoken digits with a speech recognition run")
    p.add_argument("checkpoint", type=Path, metavar="RUN", help="a run folder of `attnkit train asr` (or a ckpt-* "
                                                                 "folder)")
    p.add_argument("files", nargs="+", metavar="FILE", help="WAV files (any rate and channels; resampled to the "
                                                            "model's rate, channels averaged)")
    p.add_argument("--ctc", action="store_true",
                   help="CTC one pass: every frame labelled at once, repeats and blanks collapsed (no decoder)")
    p.add_argument("--beam", type=ints(1, 256), default=None, metavar="K",
                   help="the decoder's beam size, 1 = greedy (default: the run's, 5)")
    p.add_argument("--ctc-weight", type=floats(0, 1), default=None, metavar="W",
                   help="weight of CTC's prefix score in the beam search, 0 = attention only (default: the run's, "
                        "0.5 in runs trained now)")
    p.add_argument("--attention", type=out_path, default=None, metavar="DIR",
                   help="write each file's decoder cross-attention over the sound (PNG) and its lecture page "
                        "(HTML) to DIR: the decoder reading the transcript printed, titled with the decoding that "
                        "wrote it (default: none)")
    add_figures_option(p, "cross_attention_K_lecture.html", "cross_attention_K.png", when="with --attention: ")
    p.add_argument("--as-is", action="store_true",
                   help="decode each recording as it is; without it, silence before the first and after the last "
                        "sound is trimmed to 0.25 s, pauses longer than 0.4 s are shortened to 0.4 s and the level "
                        "is set to the training utterances' typical one")
    p.add_argument("--which", choices=("best", "latest"), default="best",
                   help="in a run folder: the checkpoint with the best dev score, or the last one saved")
    add_count_progress_option(p, "the files read, the recordings prepared and decoded")
    add_threads_option(p)
    p.set_defaults(func=run_transcribe)

    a = sub.add_parser("asr", help="speech recognition data: connected spoken digits")
    asub = a.add_subparsers(dest="asr_command", metavar="COMMAND")
    asub.required = True
    g = asub.add_parser("generate", help="write connected-digit utterances (FSDD) as WAVs and transcripts.tsv",
                        description="Utterances of 1-7 digits by one speaker, made from FSDD's recordings with "
                                    "pauses, noise, gain and speed changes; the same seed gives the same files.")
    g.add_argument("--out", type=out_path, required=True, metavar="DIR",
                   help="folder for NNNNN.wav and transcripts.tsv")
    g.add_argument("--seed", type=SEED, default=0, help="random seed: utterance i depends on it and i only")
    g.add_argument("--n", type=ints(1, 10**7), default=100, metavar="N", help="utterances to write")
    g.add_argument("--pool", choices=("train", "dev", "test", "speaker"), default="test",
                   help="recordings to draw from: FSDD index 10-49, 5-9, 0-4 of the training speakers, or every "
                        "recording of --holdout-speaker")
    g.add_argument("--holdout-speaker", default=None, metavar="NAME",
                   help="leave this speaker out of the train / dev / test pools (default: none)")
    g.add_argument("--min-digits", type=ints(1, 64), default=1, help="fewest digits in an utterance")
    g.add_argument("--max-digits", type=ints(1, 64), default=7, help="most digits in an utterance")
    g.add_argument("--overwrite", action="store_true", help="replace the files of an earlier set in --out")
    g.add_argument("--data", type=Path, default=None, metavar="PATH",
                   help="FSDD: recordings.tar.gz or a folder of WAVs (default: <data dir>/fsdd/recordings.tar.gz)")
    from ..tasks.options import add_data_args

    add_data_args(g, "fsdd/", "fetch FSDD from GitHub into the cache if missing")
    g.set_defaults(func=run_generate)
