"""``attnkit export RUN --format marian DIR``: a trained translation run as a Hugging Face Marian folder.

The folder loads with ``transformers.MarianMTModel.from_pretrained(DIR)`` and ``AutoTokenizer``, converts
with CTranslate2's ``ct2-transformers-converter --model DIR``, and loads back with
``attnkit.load_pretrained(DIR)``; see ``attnkit.pretrained.marian.export`` for what changes form.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

FORMATS = ("marian",)


def run(args) -> int:
    from ..pretrained.marian.export import export_marian
    from .translate import open_translator

    translator, folder = open_translator(args.run, args.which)
    out = export_marian(translator.model, translator.subwords.tokenizer, args.out)
    print(f"exported {folder} as a Marian folder: {out} ({', '.join(sorted(p.name for p in out.iterdir()))})",
          file=sys.stderr)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a trained translation run as a Hugging Face Marian folder")
    p.add_argument("run", type=Path, help="a run folder of `attnkit train translate` (or a ckpt-* folder)")
    p.add_argument("out", type=Path, metavar="DIR", help="the folder to write (replaced if it exists)")
    p.add_argument("--format", choices=FORMATS, required=True,
                   help="marian: Hugging Face MarianMTModel layout (also what ct2-transformers-converter "
                        "reads); required")
    p.add_argument("--which", choices=("best", "latest"), default="best",
                   help="in a run folder: the checkpoint with the best dev score, or the last one saved (default best)")
    p.set_defaults(func=run)
