"""``attnkit predict CHECKPOINT INPUT...``: tags, a label or a class, optionally attention maps as PNG."""

from __future__ import annotations

import argparse
from pathlib import Path

from .evaluate import open_checkpoint


def run(args) -> int:
    folder, meta, mod, model = open_checkpoint(args.checkpoint, args.which)
    for line in mod.predict(model, meta, args.inputs, args.attention):
        print(line)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="run a checkpoint on sentences or images")
    p.add_argument("checkpoint", type=Path, help="a run folder (its best checkpoint) or a ckpt-* folder")
    p.add_argument("inputs", nargs="+", help='sentences ("I saw a saw") or images (a PNG, or test:N)')
    p.add_argument("--attention", type=Path, default=None, help="folder to write attention maps (PNG)")
    p.add_argument("--which", choices=("best", "latest"), default="best")
    p.set_defaults(func=run)
