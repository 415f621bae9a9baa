"""The ``attnkit`` command. Each subcommand lives in its own module with ``add_parser(sub)``."""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__

# Modules under attnkit.cli that define ``add_parser(subparsers)``. Add one line per command module.
COMMAND_MODULES = [
    "demo",
    "lecture",
    "pretrained",
    "train",
    "evaluate",
    "predict",
    "lra",
]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="attnkit", description="Self-attention and Transformers: learn, apply, speed up.")
    p.add_argument("--version", action="version", version=f"attnkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"attnkit.cli.{name}").add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        result = args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"attnkit: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("attnkit: interrupted", file=sys.stderr)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
