"""``attnkit translate RUN "Ein Mann fährt Fahrrad." [--beam 5] [--sample --top-p 0.9] [--file IN]
[--attention DIR] [--steps DIR [--force STEP:TOKEN]] [--dtype bfloat16]``: translations, one line per text, and
optionally the attention as PNG and HTML (cross-attention; encoder, decoder and cross as tabs) and the decoding
step by step. Texts come from the arguments, ``--file`` (``-``: stdin), or, with neither, stdin.
A non-autoregressive run (``--decoder nat``): ``[--iterations 10] [--length-candidates 3]``."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ..data.jsonfile import file_problem
from ..inference.dtypes import DTYPES, DType
from ..nn.limits import ints
from ..train.checkpoint import CheckpointError, load_meta
from .decoding import add_decoding_args, generate_kwargs
from .evaluate import open_checkpoint
from .options import (
    add_count_progress_option,
    add_dtype_option,
    add_figures_option,
    add_threads_option,
    progress_to,
    read_lines,
    set_threads,
    utf8_text,
)


def open_translator(path: Path, which: str = "best", dtype: DType = DTYPES["float32"]):
    """(Translator, checkpoint folder) of a translation run, or (MarianTranslator, folder) of a Hugging Face
    Marian folder, weights in ``dtype`` (a row of the dtype table); a clear error for another task's run."""
    from ..pretrained.marian import is_marian_folder, load_marian

    if is_marian_folder(path):
        return load_marian(path, dtype=dtype), Path(path)
    folder, meta = load_meta(path, which=which)
    if meta.get("task") != "translate":
        raise CheckpointError(f"checkpoint: {folder} is a {meta.get('task')!r} run, not a translation run "
                              "(made by `attnkit train translate`)")
    folder, meta, mod, model = open_checkpoint(path, which, {"dtype": dtype})
    return model, folder


def _print_warnings(caught) -> None:
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)


def write_attention(tr, text: str, k: int, out_dir: Path, kw: dict, figures: str = "both") -> list[Path]:
    """Per layer a PNG (source x target, every head and their mean), the interactive page and the lecture page
    of its cross-attention (q, k, scores, softmax, weighted values, W^o), and the page of the encoder's, the
    decoder's (masked) and the cross-attention as three tabs; ``figures``: "png", "html" (the pages) or "both"."""
    from ..viz import cross_attention_html
    from ..viz.alignment import cross_attention_png
    from ..viz.translation import decoder_lecture_page, decoder_page, lecture_page

    if figures == "png":
        page, al = None, tr.attend(text, **kw)
    else:
        page, al = lecture_page(tr, text, out_dir / f"cross_attention_{k}_lecture.html", **kw)
    how = f" ({tr.describe(kw)})" if hasattr(tr, "describe") else ""  # the decoding that printed the translation
    paths = []
    for layer in range(al.weights.shape[0] if figures != "html" else 0):
        paths.append(cross_attention_png(al.weights[layer], al.source, al.target,
                                         out_dir / f"cross_attention_{k}_layer{layer + 1}.png",
                                         title=f"layer {layer + 1}: {al.translation}{how}"))
    if figures == "png":
        return paths
    paths.append(cross_attention_html(al.weights, al.source, al.target, out_dir / f"cross_attention_{k}.html",
                                      title=f"cross-attention: {text} -> {al.translation}{how}"))
    tabs, _ = decoder_page(tr, text, out_dir / f"attention_{k}.html", **kw)
    try:
        masked = [decoder_lecture_page(tr, text, out_dir / f"decoder_self_attention_{k}_lecture.html", **kw)[0]]
    except ValueError as e:  # positions that add a bias to the scores: no plain q . k chain to walk
        print(f"note: decoder_self_attention_{k}_lecture.html not written: {e}", file=sys.stderr)
        masked = []
    return [*paths, page, tabs, *masked]


def force_option(value: str) -> tuple[int, str]:
    """``--force STEP:TOKEN`` -> (step from 1, token)."""
    step, sep, token = value.partition(":")
    if not sep or not step.strip().isdigit() or int(step) < 1 or not token:
        raise argparse.ArgumentTypeError(f"expected STEP:TOKEN with STEP a step number from 1 (e.g. 3:dog), got "
                                         f"{value!r}")
    return int(step), token


def write_steps(tr, texts: list[str], out_dir: Path, args, kw: dict) -> tuple[list[str], list[Path]]:
    """Each text decoded step by step: the page steps_K.html and the lines to print."""
    from ..viz.translation import steps_page

    lines, pages = [], []
    for k, text in enumerate(texts):
        page, walk = steps_page(tr, text, out_dir / f"steps_{k}.html", force=args.force or [],
                                candidates=args.candidates, **kw)
        lines += [f"steps of {text.strip()!r}:", *walk]
        pages.append(page)
    beam = kw.get("num_beams", getattr(tr, "defaults", {}).get("num_beams", 1))
    if not tr_is_nat(tr) and (kw.get("do_sample") or beam > 1):
        lines.append(f"(the steps are greedy decoding, one token per step; the translation above used "
                     f"{'sampling' if kw.get('do_sample') else f'beam {beam}'})")
    return lines, pages


def tr_is_nat(tr) -> bool:
    return getattr(tr, "decoding", "ar") == "nat"


def run(args) -> int:
    texts = [utf8_text(t, f"translate: text {i + 1}") for i, t in enumerate(args.texts)]
    if args.file is not None and str(args.file) != "-" and file_problem(args.file) is not None:  # before the model
        if file_problem(args.file) == "no such file":
            raise FileNotFoundError(f"translate: --file not found: {args.file}")
        read_lines(args.file)  # what else it is (a folder, a loop of links), in one line
    stdin = args.file is None and not texts
    if stdin and (sys.stdin is None or sys.stdin.isatty()):
        raise ValueError("translate: give texts as arguments, --file IN, or pipe them on stdin")
    if args.force and args.steps is None:
        raise ValueError("translate: --force needs --steps DIR (the walk it forces is drawn there)")
    set_threads(args)
    tr, _ = open_translator(args.checkpoint, args.which, DTYPES[args.dtype])
    kw = generate_kwargs(args, getattr(tr, "decoding", "ar"))
    if args.file is not None or stdin:
        texts += read_lines("-" if stdin else args.file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = tr.translate(texts, progress=progress_to(args), **kw)
        written = []
        if args.attention is not None:
            for k, text in enumerate(args.texts or texts[:1]):
                if text.strip():
                    written += write_attention(tr, text, k, args.attention, kw, args.figures)
        steps = []
        if args.steps is not None:
            steps, pages = write_steps(tr, [t for t in (args.texts or texts[:1]) if t.strip()], args.steps, args, kw)
            written += pages
    _print_warnings(caught)
    for line in [*outputs, *steps]:
        print(line)
    for p in written:
        print(f"wrote {p}", file=sys.stderr)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("translate", help="translate texts with a trained translation run")
    p.add_argument("checkpoint", type=Path, help="a run folder of `attnkit train translate` (or a ckpt-* folder), "
                   "or a Hugging Face Marian (opus-mt) folder")
    p.add_argument("texts", nargs="*", help="texts to translate (one output line each)")
    p.add_argument("--file", type=Path, default=None,
                   help="translate every line of this UTF-8 file too ('-' for stdin), empty lines stay empty "
                        "(default: none; with no texts either, the lines piped on stdin)")
    add_figures_option(p, "the cross-attention's, attention_K.html and the lecture pages", "one per layer: slower",
                       when="with --attention: ")
    p.add_argument("--attention", type=Path, default=None, metavar="DIR",
                   help="write each layer's cross-attention as PNG and an interactive HTML page, its lecture page, "
                        "attention_K.html: the encoder's, the decoder's (masked) and the cross-attention as "
                        "tabs of one page, and the lecture page of the decoder's self-attention (default: none)")
    p.add_argument("--steps", type=Path, default=None, metavar="DIR",
                   help="decode each text given step by step, printed after the translations and drawn as "
                        "DIR/steps_K.html: per step the decoder's input, the most likely next tokens and the one "
                        "written (greedy), a click on another candidate showing the continuation; a "
                        "non-autoregressive run's length, row of start tokens and Mask-Predict passes (default: none)")
    p.add_argument("--force", type=force_option, action="append", default=None, metavar="STEP:TOKEN",
                   help="with --steps: also the walk that writes TOKEN at STEP (from 1; TOKEN as the page shows it, "
                        "'dog' for the word-initial '\u2581dog'), greedy after it; repeat for more walks "
                        "(default: none)")
    p.add_argument("--candidates", type=ints(1, 50), default=5, metavar="K",
                   help="with --steps: the most likely next tokens shown per step (default 5)")
    add_count_progress_option(p, "the texts translated")
    p.add_argument("--which", choices=("best", "latest"), default="best",
                   help="in a run folder: the checkpoint with the best dev score, or the last one saved")
    add_dtype_option(p, "the weights' dtype")
    add_decoding_args(p)
    add_threads_option(p)
    p.set_defaults(func=run)
