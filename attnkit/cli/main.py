"""The ``attnkit`` command. Each subcommand lives in its own module with ``add_parser(sub)``.

A start is fast: ``attnkit --help`` imports no command module (it lists ``COMMANDS``' one-line summaries) and
``attnkit CMD ...`` imports only CMD's module, which imports torch only when it runs, not to parse its options
or print its ``--help`` (``tests/cli/test_start.py``)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import platform
import sys
import warnings

from .. import __version__
from .options import Parser

# Each command: the module under attnkit.cli whose ``add_parser(subparsers)`` defines it, and the one line
# ``attnkit --help`` says of it (the same as the module's own ``help=``: tests/cli/test_start.py checks).
COMMANDS = {
    "demo": ("demo", "the main job: train a Transformer on 8x8 digits (< 3 min), show attention"),
    "lecture": ("lecture", "walk the lecture's example: I -> Q, K, V -> A -> A' -> O, one head unscaled, "
                           "then two scaled heads and W^o"),
    "embed": ("pretrained", "sentence vectors of texts (arguments, --file, or stdin)"),
    "similarity": ("pretrained", "cosine similarity of two texts"),
    "attend": ("pretrained", "a text's attention, every layer and head: what the heads do, HTML pages, PNG"),
    "train": ("train", "train a task model; writes checkpoints, metrics and curves"),
    "evaluate": ("evaluate", "score a checkpoint on a data file or a split of its dataset"),
    "predict": ("predict", "run a checkpoint on sentences, images, recordings or nodes"),
    "translate": ("translate", "translate texts with a trained translation run"),
    "export": ("export", "write a trained translation run as a Hugging Face Marian folder"),
    "positions": ("positions", "pictures of positional encodings: the sinusoidal table, distance, rotation, "
                               "learned vectors (PNG + one HTML page)"),
    "complexity": ("complexity", "measure time and memory of convolution, GRU and three attentions against "
                                 "sequence length, beside the lecture's table"),
    "lra": ("lra", "LRA-lite: efficient attention variants x long-sequence tasks"),
    "transcribe": ("asr", "transcribe WAV files of spoken digits with a speech recognition run"),
    "asr": ("asr", "speech recognition data: connected spoken digits"),
    "experiment": ("experiment", "the self-attention lecture's claims measured: data-size, rnn, positions; and "
                                 "speakers, speech recognition of a voice never heard (figure, table, results.jsonl)"),
    "info": ("info", "versions, the CPU's instruction sets and the native kernels' variant that runs"),
}
COMMAND_MODULES = list(dict.fromkeys(module for module, _ in COMMANDS.values()))


def version() -> str:
    """``attnkit X (torch Y, Python Z)``: what a problem report needs to name."""
    import torch

    return f"attnkit {__version__} (torch {torch.__version__}, Python {platform.python_version()})"


class _Version(argparse._VersionAction):
    """``--version``: torch's version is read only when asked for."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser._print_message(version() + "\n", sys.stdout)
        parser.exit()


def build_parser(command: str | None = "*") -> Parser:
    """The whole command line (``"*"``); with a command's name only that command's module is imported, with None
    none (the others are listed by name and summary, and parse nothing)."""
    p = Parser(prog="attnkit", description="Self-attention and Transformers: learn, apply, speed up.")
    p.add_argument("--version", action=_Version, help="print attnkit's, torch's and Python's versions and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    wanted = COMMAND_MODULES if command == "*" else [COMMANDS[command][0]] if command in COMMANDS else []
    done = set()
    for name, (module, summary) in COMMANDS.items():
        if module in wanted and module not in done:
            importlib.import_module(f"attnkit.cli.{module}").add_parser(sub)
            done.add(module)
        elif module not in wanted:
            sub.add_parser(name, help=summary)
    return p


def named_command(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def unknown_command(word: str) -> str:
    """``attnkit: error: no command 'trian'; did you mean train? (see attnkit --help)``."""
    close = difflib.get_close_matches(word, list(COMMANDS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"attnkit: error: no command {word!r}{hint} (see attnkit --help)"


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
    argv = sys.argv[1:] if argv is None else list(argv)
    command = named_command(argv)
    if command is not None and command not in COMMANDS:
        print(unknown_command(command), file=sys.stderr)
        return 2
    parser = build_parser(command)
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
