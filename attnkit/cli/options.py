"""How the command line reads and explains its options.

``Parser`` / ``HelpFormatter``: every option's help line ends with its choices and its default, so each
option of every command says what it does, what it accepts and what it is when not given (options
built from config fields take their text from the field's ``metadata["help"]``, see
``attnkit.tasks.options``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..data.text import decode_line, utf8_lines


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(choices: ...; default: ...)`` to an option's help unless the help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = (action.help or "").removesuffix(" (default: %(default)s)")  # BooleanOptionalAction's, < 3.13
        if isinstance(action, argparse._SubParsersAction) or text == argparse.SUPPRESS:
            return text
        said = text.lower()
        extra = []
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

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        # a parser with sub-commands (or already inside the intermixed parse) parses as argparse does
        if self._intermixing or any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions):
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


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


def read_lines(path: Path | str) -> list[str]:
    """The lines of a UTF-8 text file (``-`` = stdin), without line ends. Bytes that are not UTF-8 raise a
    ValueError naming the file, the line and the column."""
    if str(path) != "-":
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such file")
        return [line for _, line in utf8_lines(path)]
    if not hasattr(sys.stdin, "buffer"):  # a text stream without bytes (tests replace stdin)
        return sys.stdin.read().splitlines()
    data = sys.stdin.buffer.read().removeprefix(b"\xef\xbb\xbf")
    return [decode_line(raw, "<stdin>", n) for n, raw in enumerate(data.splitlines(), 1)]
