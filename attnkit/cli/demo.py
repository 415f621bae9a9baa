"""``attnkit demo``: the main job. For now the lecture walk-through; the training issue makes it
train the digits model on embedded data."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import lecture


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the main job: the lecture's example with heatmaps")
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder")
    p.set_defaults(func=lambda a: lecture.run(a.out))
