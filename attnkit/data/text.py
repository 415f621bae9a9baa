"""Text files read line by line, with an error naming the file, the line and the column for bytes that
are not UTF-8 (a text stream decodes in chunks, so its own error cannot say which line)."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["decode_line", "utf8_lines"]


def decode_line(raw: bytes, where: str, lineno: int) -> str:
    """``raw`` decoded as UTF-8; a ValueError ``where:lineno: not UTF-8 text (byte 0x.. at column N)``."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}:{lineno}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1})") \
            from None


def utf8_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) of a UTF-8 file, ``.gz`` read directly; a BOM is dropped."""
    path = Path(path)
    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
        for lineno, raw in enumerate(f, 1):
            if lineno == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            yield lineno, decode_line(raw.rstrip(b"\n").rstrip(b"\r"), str(path), lineno)
