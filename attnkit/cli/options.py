"""How the command line reads and explains its options.

``Parser`` / ``HelpFormatter``: every option's help line ends with its range or choices and its default, so
each option of every command says what it does, what it accepts and what it is when not given (options
built from config fields take their text and range from the field's ``metadata``, see
``attnkit.tasks.options``). A numeric option's ``type`` is an ``attnkit.nn.limits.Range``: a value outside it
is refused while parsing, before anything runs. A usage error is one line (the command, the option, the
problem), not the usage text; an option the command does not have (a typo: ``attnkit train tagger
--max-stesp 30``) is said by the sub-command it was given to, after that command's one-line usage, with the
closest option it has ("did you mean --max-steps?").

``read_lines``: the one rule for the lines of a text file or stdin. ``add_threads_option`` / ``set_threads``:
``--threads`` of every command that runs a model, one default (this machine's cores, capped). ``add_figures_option`` /
``writes``: ``--figures html|png|both`` of every command that writes both HTML pages and PNG files.
``add_count_progress_option`` / ``progress_to``: ``--progress`` of a command whose stdout is its results (a bar on a
terminal, else plain lines on stderr). ``add_dtype_option``: ``--dtype`` of every command that runs a model in a
chosen dtype, from the one table of dtypes.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from pathlib import Path

from ..data.jsonfile import file_problem
from ..data.text import decode_line
from ..inference.dtypes import DTYPES, OPTION
from ..nn.limits import Range, ints

_ROLE = re.compile(r":\w+(?::\w+)?:`~?([^`]+)`")  # :func:`name`, :py:class:`~a.B`
_EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])")  # *previous token*


def plain(text: str) -> str:
    """Help text as a terminal shows it: docstrings' reST markup (``code``, :role:`name`, *emphasis*) dropped,
    the words kept."""
    return _EMPHASIS.sub(r"\1", _ROLE.sub(r"\1", text).replace("``", ""))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(an integer in [1, 8]; choices: ...; default: ...)`` (its range, choices and default) to an
    option's help unless the help already says it; descriptions and help come out without reST markup
    (``plain``)."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action))

    def _get_help_string(self, action: argparse.Action) -> str:
        text = (action.help or "").removesuffix(" (default: %(default)s)")  # BooleanOptionalAction's, < 3.13
        if isinstance(action, argparse._SubParsersAction) or text == argparse.SUPPRESS:
            return text
        said = text.lower()
        extra = []
        if isinstance(action.type, Range) and action.type.span() not in text:
            extra.append(action.type.text())
        if action.choices is not None and "choices" not in said:
            extra.append("choices: " + ", ".join(str(c) for c in action.choices))
        default = action.default
        flag = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
        if default not in (None, argparse.SUPPRESS) and not flag and "default" not in said and action.option_strings:
            shown = "on" if default is True else "off" if default is False else str(default)
            extra.append(f"default: {shown}".replace("%", "%%"))
        return f"{text} ({'; '.join(extra)})" if extra else text


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose sub-commands (``add_subparsers``) use ``HelpFormatter`` too, and whose
    commands take their positionals between options: ``attnkit translate RUN --beam 5 "Ein Hund."`` gives the
    text to ``texts`` (plain argparse stops a list of positionals at the first option, and then refuses the
    rest as unrecognized)."""

    _last: Parser | None = None  # the (sub-)parser that began parsing last: the command a stray option was given to

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._intermixing = False

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but arguments no command takes are refused by the deepest sub-command that ran
        (``attnkit train tagger``, not ``attnkit``), with its usage line and the closest option it has."""
        Parser._last = None
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            (Parser._last or self).unrecognized(extras)
        return namespace

    def unrecognized(self, extras: list[str]):
        """Two lines on stderr (this command's usage, then the error naming the closest option), exit 2."""
        options = sorted({o for a in self._actions for o in a.option_strings if o.startswith("--")})
        stray = [x.split("=", 1)[0] for x in extras if x.startswith("-") and len(x) > 1]
        close = difflib.get_close_matches(stray[0], options, n=1, cutoff=0.6) if stray else []
        hint = f"; did you mean {close[0]}?" if close else ""
        what = f"unrecognized argument{'s' if len(extras) > 1 else ''}: {' '.join(extras)}"
        sys.stderr.write(self.short_usage() + "\n")
        self.error(what + hint)

    def _subcommands(self) -> bool:
        return any(isinstance(a, argparse._SubParsersAction) for a in self._actions)

    def _refuse_unknown_options(self, args: list[str]) -> None:
        """A ``--name`` this command does not have (nor abbreviates) is refused first, before a missing required
        option is: ``train tagger --max-stesp 30`` says "did you mean --max-steps?", not "--out is required"."""
        options = [o for a in self._actions for o in a.option_strings]
        unknown = []
        for x in args:
            if x == "--":
                break
            name = x.split("=", 1)[0]
            if name.startswith("--") and name not in options and not (
                    self.allow_abbrev and any(o.startswith(name) for o in options)):
                unknown.append(x)
        if unknown:
            self.unrecognized(unknown)

    def short_usage(self) -> str:
        """``usage: attnkit train tagger --out DIR [options]``: the positionals and required options, in one line."""
        parts = []
        for a in self._actions:
            if isinstance(a, argparse._SubParsersAction):
                parts.append(a.metavar or "COMMAND")
            elif a.option_strings:
                if a.required:
                    parts.append(f"{a.option_strings[-1]} {a.metavar or a.dest.upper()}")
            else:
                name = a.metavar or a.dest.upper()
                parts.append({"+": f"{name} [{name} ...]", "*": f"[{name} ...]", "?": f"[{name}]"}.get(a.nargs, name))
        return f"usage: {self.prog} {' '.join(parts + ['[options]'])}"

    def parse_known_args(self, args=None, namespace=None):
        Parser._last = self
        if not self._intermixing and not self._subcommands():
            self._refuse_unknown_options(sys.argv[1:] if args is None else list(args))
        # a parser with sub-commands (or already inside the intermixed parse) parses as argparse does
        if self._intermixing or any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions):
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def error(self, message: str):
        """One line on stderr, ``attnkit train translate: error: argument --d-model: must be ...``, exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def utf8_text(value: str, name: str) -> str:
    """``value`` if it is text; a ValueError naming ``name`` for command-line bytes that are not UTF-8.

    Python keeps undecodable argv bytes as lone surrogates (U+DC80-U+DCFF); nothing downstream can use them."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        code = ord(value[e.start])
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"character U+{code:04X}"
        raise ValueError(f"{name} is not UTF-8 text ({what} at character {e.start + 1})") from None
    return value


def split_lines(data: bytes, where: str) -> list[str]:
    """The lines of UTF-8 bytes: a line ends at ``\n`` (a ``\r`` before it is dropped; a ``\r`` elsewhere is
    part of the line), a last line without ``\n`` counts, a BOM at the start is dropped, empty lines are kept.
    Bytes that are not UTF-8: a ValueError naming ``where``, the line and the column."""
    parts = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    if parts[-1] == b"":
        parts.pop()  # the end of the last line, not a line
    return [decode_line(raw.rstrip(b"\r"), where, n) for n, raw in enumerate(parts, 1)]


def read_lines(path: Path | str) -> list[str]:
    """The lines of a UTF-8 text file (``-`` = stdin) by ``split_lines``'s rule, the same for both: one entry
    per line, empty lines included, so output row i belongs to input line i."""
    if str(path) == "-":
        stdin = sys.stdin
        data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read().encode("utf-8", "surrogateescape")
        return split_lines(data, "<stdin>")  # (a text stream without bytes: tests replace stdin)
    problem = file_problem(path)
    if problem == "no such file":
        raise FileNotFoundError(f"{path}: no such file")
    if problem is not None:  # a folder, a loop of symbolic links, ...
        raise ValueError(f"{path}: {problem}" if problem.startswith("cannot") else f"{path} is {problem}, not a "
                         "text file")
    if Path(path).suffix == ".gz":
        import gzip

        with gzip.open(path, "rb") as f:
            return split_lines(f.read(), str(path))
    return split_lines(Path(path).read_bytes(), str(path))


def add_progress_option(p: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` of a command that trains."""
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars (default: only when stderr is a terminal; otherwise a plain line at least "
                        "every 10 s). Dev results and the summary print either way")


def add_count_progress_option(p: argparse.ArgumentParser, counted: str) -> None:
    """``--progress`` / ``--no-progress`` of a command whose stdout is its results (``counted``: "the texts
    translated"): what ``progress_to`` makes of it."""
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help=f"a progress bar on stderr counting {counted} (default: only when stderr is a terminal; "
                        "otherwise a plain line on stderr at least every 10 s; --no-progress: neither)")


def progress_to(args: argparse.Namespace):
    """``--progress`` as the ``progress`` argument of ``attnkit.train.progress.counter``: a bar on a terminal (or
    with --progress); else plain lines on stderr at least every 10 s of a long run (stdout holds the results);
    --no-progress: nothing."""
    from ..train.progress import bars_wanted

    if args.progress is False:
        return False
    return True if bars_wanted(args.progress) else (lambda line: print(line, file=sys.stderr, flush=True))


FIGURES = ("html", "png", "both")  # --figures: what a command that draws both pages and PNGs writes


def add_figures_option(p: argparse.ArgumentParser, pages: str, pngs: str, when: str = "") -> None:
    """``--figures html|png|both`` (default both), the one definition for every command that writes HTML pages and
    PNG files: ``pages`` and ``pngs`` name what each choice writes, ``when`` the option it goes with
    ("with --attention: ")."""
    p.add_argument("--figures", choices=FIGURES, default="both",
                   help=f"{when}what to write: the HTML pages ({pages}), the PNG files ({pngs}) or both")


def writes(args: argparse.Namespace, kind: str) -> bool:
    """Whether ``--figures`` asks for ``kind`` ("html" or "png"); a command without the option writes both."""
    return getattr(args, "figures", "both") in (kind, "both")


THREADS = ints(0, 1024)  # --threads N: torch threads (0 = torch's own choice)
THREADS_CAP = 8  # the default never asks for more: these models stop gaining well before


def default_threads() -> int:
    """The default of ``--threads``: the cores this process may run on, shared among the processes of a torchrun
    launch on this machine (``LOCAL_WORLD_SIZE``), at least 1 and at most ``THREADS_CAP``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    local = os.environ.get("LOCAL_WORLD_SIZE", "1")
    return max(1, min(THREADS_CAP, cores // max(1, int(local) if local.isdigit() else 1)))


def out_path(text: str) -> Path:
    """An argparse ``type`` for an output folder or file: any path but the empty one (``--out ""`` would write into
    the working folder, which ``export`` refuses too)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must name a folder or file, got {text!r}")
    return Path(text)


def add_dtype_option(p: argparse.ArgumentParser, what: str, default: str | None = "float32", note: str = "") -> None:
    """``--dtype NAME``: its choices and their words from the one table of dtypes (``attnkit.inference.dtypes``);
    ``what`` the option does, ``note`` what the help adds after the choices."""
    rows = "; ".join(f"{name}: {DTYPES[name].says}" for name in OPTION)
    p.add_argument("--dtype", choices=OPTION, default=default, help=f"{what} ({rows}{note})")


def add_threads_option(p: argparse.ArgumentParser, note: str = "", *, per_process: bool = False) -> None:
    """``--threads N`` with its default stated: this machine's cores, capped (``default_threads``)."""
    cores = "this machine's cores, divided among torchrun's processes," if per_process else "this machine's cores,"
    p.add_argument("--threads", type=THREADS, default=None,
                   help=f"torch threads{' per process' if per_process else ''} (0 = torch's own choice; default: "
                        f"{cores} at most {THREADS_CAP}: {default_threads()} here{'; ' + note if note else ''})")


def set_threads(args: argparse.Namespace) -> int:
    """Apply ``args.threads`` (None: ``default_threads()``; 0: leave torch's choice); returns torch's thread count."""
    import torch

    n = default_threads() if getattr(args, "threads", None) is None else args.threads
    if n:
        torch.set_num_threads(n)
    return torch.get_num_threads()
