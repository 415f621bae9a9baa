"""``attnkit predict RUN INPUT...``: tags, a label or a class, optionally attention maps as PNG and HTML
(``--figures``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..train.checkpoint import load_meta
from .evaluate import add_checkpoint_args, open_checkpoint
from .options import add_figures_option, add_threads_option, set_threads, utf8_text

# Runs whose own command reads their inputs (WAV files, texts with decoding options) instead of predict.
ELSEWHERE = {"asr": ("a speech recognition run", "attnkit transcribe RUN FILE.wav ... (`attnkit asr generate` "
                                                  "writes WAV files)")}


def run(args) -> int:
    set_threads(args)
    inputs = [x if os.path.exists(x) else utf8_text(x, f"predict: input {i + 1}") for i, x in enumerate(args.inputs)]
    task = load_meta(args.checkpoint, which=args.which)[1].get("task")
    if task in ELSEWHERE:
        what, use = ELSEWHERE[task]
        raise ValueError(f"predict: {args.checkpoint} is {what}; use {use}")
    folder, meta, mod, model = open_checkpoint(args.checkpoint, args.which)
    for line in mod.predict(model, meta, inputs, args.attention, args):
        print(line)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="run a checkpoint on sentences, images, recordings or nodes")
    add_checkpoint_args(p)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help='by the run\'s task: raw sentences ("Time flies like an arrow.") for tagger (split into '
                        "words as UD English EWT splits them) and classifier (split as the run's training text was: "
                        "SST-2's Penn Treebank words, 'film.' -> film .); an image file or train:N / dev:N / test:N "
                        "for image; a WAV file or train:N / test:N for speech; node ids for graph")
    p.add_argument("--attention", type=Path, default=None, metavar="DIR",
                   help="folder to write attention maps to: PNG; for text also the HTML page, and for the tagger the "
                        "lecture page; for graph the attention of each node's neighbours (default: none)")
    add_figures_option(p, "tagger and classifier: attention_K.html; tagger: lecture_K.html",
                       "attention_K.png; image, speech and graph draw only these", when="with --attention: ")
    add_threads_option(p)
    p.set_defaults(func=run)
