"""The one reader of the JSON files attnkit is given: ``meta.json``, ``latest.json`` / ``best.json``,
``config.json``, ``generation_config.json``, ``vocab.json``, ...

``read_json(path)`` accepts a regular file (not a folder, a device or a FIFO; a symbolic link is
followed, as in Hugging Face's cache, and its target must be a regular file) of at most ``limit``
bytes, in UTF-8, holding JSON nested at most ``MAX_DEPTH`` deep; the depth is measured before
parsing (Python's parser recurses: a file nested 200,000 deep would raise RecursionError).
``regular_file(path, limit)`` is the same check for the files other libraries parse
(``tokenizer.json``, ``bpe.json``, sentencepiece models). Every problem is one ``ValueError`` line
naming the file; a missing file is a ``FileNotFoundError`` naming it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

__all__ = ["read_json", "read_json_bytes", "regular_file", "file_problem", "MAX_DEPTH", "JSON_LIMIT"]

MAX_DEPTH = 64  # attnkit's own files nest at most about 10 deep; Hugging Face's tokenizer.json about 8
JSON_LIMIT = 16 << 20  # bytes (parsed, up to about 16 times as much memory): a 200,000-word vocabulary is 4 MB
# a JSON string, matched without backtracking (possessive), so that its brackets are not counted
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)


def _kind(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def file_problem(path: str | Path) -> str | None:
    """None when ``path`` is a regular file (through its links); else why not, in words: "no such file", "a
    folder", "a loop of symbolic links", ... (``Path.exists`` calls a loop of links missing)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "no such file"
    except OSError as e:
        return "a loop of symbolic links" if e.errno == errno.ELOOP else f"cannot be read ({e.strerror})"
    return None if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)


def regular_file(path: str | Path, limit: int) -> int:
    """The size of ``path`` after checking that it is a regular file of at most ``limit`` bytes."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"file not found: {path}") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path}: expected a file, got {_kind(st.st_mode)}")
    if st.st_size > limit:
        raise ValueError(f"{path}: {st.st_size} bytes, more than the {limit} attnkit reads from such a file")
    return st.st_size


def depth(text: str) -> int:
    """How deep the arrays and objects of a JSON text nest (strings skipped; a text that is not JSON gets a
    number too, and the parser then says what is wrong)."""
    import numpy as np  # here: the command line reads JSON files before it needs numpy

    brackets = _STRING.sub("", text).encode("utf-8")
    b = np.frombuffer(brackets, dtype=np.uint8)
    step = (b == ord("[")).astype(np.int64) + (b == ord("{")) - (b == ord("]")) - (b == ord("}"))
    return int(step.cumsum().max(initial=0))


def read_json(path: str | Path, *, limit: int = JSON_LIMIT) -> Any:
    """The JSON value in ``path``, checked as the module doc says; one ValueError line naming the file."""
    path = Path(path)
    regular_file(path, limit)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since it was checked
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror})") from None
    if len(data) > limit:
        raise ValueError(f"{path}: more than the {limit} bytes attnkit reads from such a file")
    return read_json_bytes(data, path)


def read_json_bytes(data: bytes, path: str | Path, what: str = "JSON") -> Any:
    """The JSON value of ``data`` (read from ``path``, named in the errors), nested at most ``MAX_DEPTH``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid {what} (not UTF-8 at byte {e.start})") from None
    if (d := depth(text)) > MAX_DEPTH:
        raise ValueError(f"{path}: {what} nested {d} deep; attnkit reads at most {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError(f"{path}: {what} nested too deep") from None
    except ValueError as e:  # JSONDecodeError, or an integer of more digits than Python converts
        raise ValueError(f"{path}: not valid {what} ({' '.join(str(e).split())})") from None
