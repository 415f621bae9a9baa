"""The ``attnkit`` command. Each subcommand lives in its own module with ``add_parser(sub)``."""

from __future__ import annotations

import importlib
import os
import platform
import sys
import warnings

from .. import __version__
from .options import Parser

# Modules under attnkit.cli that define ``add_parser(subparsers)``. Add one line per command module.
COMMAND_MODULES = [
    "demo",
    "lecture",
    "pretrained",
    "train",
    "evaluate",
    "predict",
    "translate",
    "export",
    "positions",
    "complexity",
    "lra",
    "asr",
    "experiment",
    "info",
]


def version() -> str:
    """``attnkit X (torch Y, Python Z)``: what a problem report needs to name."""
    import torch

    return f"attnkit {__version__} (torch {torch.__version__}, Python {platform.python_version()})"


def build_parser() -> Parser:
    p = Parser(prog="attnkit", description="Self-attention and Transformers: learn, apply, speed up.")
    p.add_argument("--version", action="version", version=version(),
                   help="print attnkit's, torch's and Python's versions and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"attnkit.cli.{name}").add_parser(sub)
    return p


def _stdout_closed() -> int:
    """The reader of our stdout went away (``attnkit embed ... | head``): stop quietly, as Unix tools do.

    Output still buffered would fail again when Python flushes stdout at exit, so stdout is pointed at
    /dev/null first. Exit status 141 = 128 + SIGPIPE, what a shell reports for a tool killed by it."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # stdout replaced by an object without a file
        return 141
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return 141


def _warning_lines():
    """A ``warnings.showwarning`` printing each warning once, as one line ``warning: ...`` (no source line)."""
    seen = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = " ".join(str(message).split())
        if text not in seen:
            seen.add(text)
            print(f"warning: {text}", file=sys.stderr)

    return show


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        from ..functional.native import isa

        isa.requested()  # a bad ATTNKIT_CPU_ISA: one line before any work
        with warnings.catch_warnings():  # a warning is one line "warning: ...", without Python's source line
            warnings.showwarning = _warning_lines()
            result = args.func(args)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handler, not at interpreter exit
    except BrokenPipeError:
        return _stdout_closed()
    except ValueError as e:
        print(f"attnkit: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a full disk, a read-only folder, a file where a folder should be: one line naming it
        from ..outputs import error_line

        print(f"attnkit: error: {error_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("attnkit: interrupted", file=sys.stderr)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
