"""The ``attnkit`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import __version__
from . import lecture


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="attnkit", description="Self-attention and Transformers: learn, apply, speed up.")
    p.add_argument("--version", action="version", version=f"attnkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    d = sub.add_parser("demo", help="the main job (now: the lecture walk-through)")
    d.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder")
    d.set_defaults(func=lambda a: lecture.run(a.out))
    lecture.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"attnkit: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
