"""Files written atomically, and the generated datasets' arrays in ``.npz`` files read back without pickle.

``write_atomic(path, write)``: ``write(f)`` fills a new file beside ``path`` whose name no other writer has (the
process id and a random part, created exclusively), which then replaces ``path`` in one step (``os.replace``). A
reader sees the old file or the whole new one, never a part; two writers of one path (two ranks, two runs into
one folder) never write into the same file, and the one that finishes last is the file. A write that fails
leaves ``path`` as it was and no temporary file behind.

``write_npz(path, **arrays)`` and ``read_npz(path, names, what=..., missing=...)``: compressed ``.npz`` files of
named arrays (the generated MQAR and Pathfinder splits), read with ``allow_pickle=False``; ``write_splits``
writes one such file per split.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import numpy as np

__all__ = ["write_atomic", "write_npz", "read_npz", "write_splits"]


def write_atomic(path: str | os.PathLike, write: Callable[[IO], object], *, text: bool = False) -> Path:
    """``write(f)`` into a temporary file of its own beside ``path`` (folders made), then moved onto ``path``.
    ``text``: ``f`` is opened for UTF-8 text with newlines as written, else for bytes. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.part")
    try:
        with open(tmp, "x", encoding="utf-8", newline="") if text else open(tmp, "xb") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if tmp.exists():  # the write failed: nothing of it stays
            tmp.unlink()
    return path


def write_npz(path: str | os.PathLike, **arrays: np.ndarray) -> Path:
    """``arrays`` by name into a compressed ``.npz`` at ``path``, atomically (``write_atomic``)."""
    return write_atomic(path, lambda f: np.savez_compressed(f, **arrays))


def read_npz(path: str | os.PathLike, names: Sequence[str], *, what: str, missing: str) -> tuple[np.ndarray, ...]:
    """The arrays ``names`` of an ``.npz`` file (no pickle). A missing file: FileNotFoundError ``what: PATH does
    not exist; missing``; one that is not such a file or lacks a name: ValueError ``what: cannot read PATH: ...``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what}: {path} does not exist; {missing}")
    try:
        with np.load(path, allow_pickle=False) as f:
            return tuple(f[name] for name in names)
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{what}: cannot read {path}: {e}") from None


def write_splits(splits: dict[str, tuple[np.ndarray, ...]], out_dir: str | os.PathLike, files: dict[str, str],
                 names: Sequence[str]) -> list[Path]:
    """``files[split]`` in ``out_dir`` for each split, holding ``splits[split]``'s arrays under ``names``."""
    out = Path(out_dir)
    return [write_npz(out / file, **dict(zip(names, splits[split], strict=True))) for split, file in files.items()]
