"""``attnkit positions --out DIR``: the lectures' pictures of positional encodings (``attnkit.viz.positions``).

The sinusoidal table, dot products against distance, d2l's fixed-rotation demonstration (checked on
every position), and a pretrained model's learned position vectors (MiniLM's by default).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..nn.limits import ints
from .options import add_figures_option

SIZE = ints(1, 4096)  # positions and dimensions of a figure

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def run(args) -> int:
    from ..viz.positions import position_figures

    learned, name = None, ""
    if args.model:
        from .pretrained import _model

        enc = _model(args.model)  # loaded once per process
        learned = enc.model.embeddings.position_embeddings.weight.detach()[: args.learned_positions]  # (P, d)
        name = enc.name
    res = position_figures(args.out, length=args.length, dim=args.dim, delta=args.delta, learned=learned,
                           learned_name=name, figures=args.figures)
    rc = res["rotation"]
    print(f"sinusoidal table: {args.length} positions x {args.dim} dimensions")
    print(f"fixed 2x2 rotations map position i to i + {rc.delta}: largest error {rc.max_error:.2e} over "
          f"{rc.positions} positions x {rc.pairs} pairs")
    if learned is not None:
        near = res["learned_by_distance"]
        print(f"{name}: mean cosine similarity of learned position vectors at distance 1: {near[1]:.3f}, "
              f"10: {near[10]:.3f}, {len(near) - 1}: {near[-1]:.3f} (first {len(learned)} positions)")
    for key in ("sinusoidal", "distance", "rotation_png", "learned", "page"):
        if key in res:
            print(f"wrote {res[key]}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("positions", help="pictures of positional encodings: the sinusoidal table, distance, "
                                         "rotation, learned vectors (PNG + one HTML page)")
    p.add_argument("--out", type=Path, default=Path("runs/positions"), help="output folder (default runs/positions)")
    p.add_argument("--length", type=SIZE, default=64, help="positions in the sinusoidal table (default 64)")
    p.add_argument("--dim", type=SIZE, default=128, help="encoding dimensions, even (default 128)")
    p.add_argument("--delta", type=SIZE, default=3, help="offset of the rotation demonstration (default 3)")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"pretrained model whose learned position vectors to show (default {DEFAULT_MODEL}; "
                        "'' to skip)")
    p.add_argument("--learned-positions", type=SIZE, default=128,
                   help="how many of its learned positions to compare (default 128)")
    add_figures_option(p, "positions.html, the pictures inside it", "sinusoidal.png, distance.png, rotation.png, "
                                                                      "learned.png")
    p.set_defaults(func=run)
