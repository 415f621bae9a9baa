"""``attnkit export RUN --format marian DIR``: a trained translation run as a Hugging Face Marian folder.

The folder loads with ``transformers.MarianMTModel.from_pretrained(DIR)`` and ``AutoTokenizer``, converts
with CTranslate2's ``ct2-transformers-converter --model DIR``, and loads back with
``attnkit.load_pretrained(DIR)``; see ``attnkit.pretrained.marian.export`` for what changes form.

DIR is written beside itself and renamed into place (``attnkit.outputs.write_folder``): it must be new or
empty, or, with ``--overwrite``, an earlier export holding only its own files (``.attnkit-export.json``
lists them). The run itself, a folder holding it, the current folder, the home folder and ``/`` are refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

FORMATS = ("marian",)


def run(args) -> int:
    from ..outputs import check_replaceable
    from ..pretrained.marian import is_marian_folder
    from ..pretrained.marian.export import export_marian
    from .translate import open_translator

    keep = [("the run exported", args.run)]
    check_replaceable(args.out, overwrite=args.overwrite, keep=keep)  # before loading anything
    if is_marian_folder(args.run):
        raise ValueError(f"export: {args.run} is a Hugging Face Marian folder already; export writes runs of "
                         f"`attnkit train translate`")
    translator, folder = open_translator(args.run, args.which)
    if getattr(translator, "decoding", None) != "ar":
        raise ValueError(f"export --format marian: {folder} is a {getattr(translator, 'decoding', '?')!r} run; "
                         f"Marian holds autoregressive translation runs only")
    keep.append(("the checkpoint exported", folder))
    out = export_marian(translator.model, translator.subwords.tokenizer, args.out, overwrite=args.overwrite,
                        keep=keep)
    print(f"exported {folder} as a Marian folder: {out} ({', '.join(sorted(p.name for p in out.iterdir()))})",
          file=sys.stderr)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a trained translation run as a Hugging Face Marian folder")
    p.add_argument("run", type=Path, help="a run folder of `attnkit train translate` (or a ckpt-* folder)")
    p.add_argument("out", type=Path, metavar="DIR",
                   help="the folder to write: new or empty (an earlier export only with --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace DIR if it is an earlier `attnkit export` holding only its own files (default: "
                        "refuse any folder that is not empty)")
    p.add_argument("--format", choices=FORMATS, required=True,
                   help="marian: Hugging Face MarianMTModel layout (also what ct2-transformers-converter "
                        "reads); required")
    p.add_argument("--which", choices=("best", "latest"), default="best",
                   help="in a run folder: the checkpoint with the best dev score, or the last one saved (default best)")
    p.set_defaults(func=run)
