"""Where attnkit writes: output paths checked before anything is written, folders swapped in whole, OS errors
that name their file.

- ``writing(path)``: an ``OSError`` raised inside names ``path`` when it names no file (a ``write()`` that
  hits a full disk names none), and safetensors' I/O errors become that ``OSError``; ``error_line(e)``
  is the one line the command line prints for it ("no space left on device writing FILE").
- ``out_folder(path, what)``: a folder a command writes its files into (``attend --out``, ``lra generate
  --out``), made if missing; a one-line ``ValueError`` when it, or a folder on its way, is a file.
- ``write_folder(final, write, ...)``: a folder written whole (``attnkit export``): into a new temporary
  folder beside ``final``, then renamed into place. It replaces only a folder that it wrote itself (the
  marker file ``.attnkit-export.json`` lists its files, and the folder holds nothing else), and then only
  with ``overwrite``; never ``/``, the home folder, the current folder, a folder given in ``keep`` (the run
  being exported) or any folder that holds one of those.
- ``swap_in(tmp, final)``: ``tmp`` renamed to ``final``; a folder already there is renamed aside first
  and deleted only once the new one is in place.

This module imports nothing from attnkit, so every layer may use it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path

__all__ = ["MARKER", "writing", "error_line", "out_folder", "write_folder", "check_replaceable", "swap_in",
           "fsync_folder"]

MARKER = ".attnkit-export.json"  # in every folder write_folder made: what wrote it and the files it holds


@contextmanager
def writing(path: str | os.PathLike):
    """Name ``path`` in the ``OSError`` raised inside when it names no file; a safetensors I/O error (a
    ``SafetensorError`` with "os error N") becomes ``OSError(N, ..., path)``."""
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is not None:
            e.filename = str(path)
        raise
    except Exception as e:
        code = re.search(r"os error (\d+)", str(e)) if type(e).__name__ == "SafetensorError" else None
        if code is None:
            raise
        raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), str(path)) from None


def error_line(e: OSError) -> str:
    """One line for an OSError: "no space left on device writing FILE", else "FILE: reason"."""
    if e.errno is None or e.strerror is None:  # raised by attnkit with its own message
        return " ".join(str(e).split())
    name = e.filename if e.filename is not None else "a file"
    if e.errno == errno.ENOSPC:
        return f"no space left on device writing {name}"
    if e.errno == errno.EDQUOT:
        return f"disk quota exceeded writing {name}"
    if e.filename2 is not None:
        return f"{name} -> {e.filename2}: {e.strerror}"
    return f"{name}: {e.strerror}"


def _blocking(path: Path) -> tuple[Path, str] | None:
    """The first of ``path`` and its parents that exists, if it is not a folder: (it, what it is)."""
    for p in (path, *path.parents):
        if os.path.lexists(p):
            if p.is_dir():
                return None
            kind = ("a broken symbolic link" if not p.exists() else "a file" if p.is_file()
                    else "a special file (a device, pipe or socket)")
            return p, kind
    return None


def out_folder(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a folder to write into, made if missing; a ValueError ("``what`` X: Y is a file, not a
    folder") when it or a folder on its way is a file, a device or a broken link."""
    p = Path(path)
    bad = _blocking(p)
    if bad is not None:
        where = "" if bad[0] == p else f": {bad[0]} is {bad[1]}"
        kind = f"is {bad[1]}, not a folder" if bad[0] == p else "cannot be made"
        raise ValueError(f"{what} {p} {kind}{where}")
    with writing(p):
        p.mkdir(parents=True, exist_ok=True)
    return p


def _protected(keep: Iterable[tuple[str, Path]]) -> list[tuple[str, Path]]:
    out = [("the file system's root", Path("/").resolve()), ("the current folder", Path.cwd().resolve())]
    try:
        out.append(("the home folder", Path.home().resolve()))
    except (RuntimeError, KeyError, OSError):  # no home folder known
        pass
    return out + [(name, Path(p).resolve()) for name, p in keep]


def _listed(folder: Path) -> list[str] | None:
    """The files ``folder``'s marker lists, or None when it has no valid marker."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    ok = isinstance(files, list) and all(isinstance(f, str) for f in files)
    return files if ok and data.get("written_by") == "attnkit export" else None


def check_replaceable(final: str | os.PathLike, *, overwrite: bool = False, keep: Iterable[tuple[str, Path]] = (),
                      what: str = "export") -> None:
    """A ValueError, one line, unless ``final`` may be written by ``write_folder``: it is missing, an empty
    folder, or (with ``overwrite``) a folder that ``write_folder`` wrote and that holds nothing else.
    ``keep``: (description, folder) pairs never replaced, nor any folder holding them."""
    raw = os.fspath(final)
    if raw in ("", "."):
        raise ValueError(f"{what}: refusing to write into {raw!r} (the current folder); name a new folder")
    p = Path(raw)
    if p.is_symlink():
        raise ValueError(f"{what}: {p} is a symbolic link; name the folder itself")
    target = p.resolve()
    for name, q in _protected(keep):
        if target == q or target in q.parents:
            holds = "is" if target == q else "holds"
            raise ValueError(f"{what}: refusing to replace {p}: it {holds} {name} ({q})")
    bad = _blocking(p)
    if bad is not None:
        where = "" if bad[0] == p else f" ({bad[0]} is {bad[1]})"
        raise ValueError(f"{what}: {p} exists and is not a folder{where}" if bad[0] == p
                         else f"{what}: cannot make {p}{where}")
    if not p.exists():
        return
    if os.path.ismount(p):
        raise ValueError(f"{what}: {p} is a mount point; name a folder inside it")
    entries = set(os.listdir(p))
    if not entries:
        return
    listed = _listed(p)
    if listed is None:
        raise ValueError(f"{what}: {p} is a folder that attnkit export did not write (no valid {MARKER}); "
                         f"refusing to replace it: name a new or empty folder")
    extra = sorted(entries - set(listed) - {MARKER})
    if extra:
        raise ValueError(f"{what}: {p} holds {extra[0]!r}, which attnkit export did not write; refusing to replace "
                         f"it: name a new or empty folder")
    if not overwrite:
        raise ValueError(f"{what}: {p} holds an earlier export; replace it with --overwrite")


def fsync_folder(path: Path) -> None:
    """Flush a folder's entries (a rename inside it) to disk; a no-op where folders cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def swap_in(tmp: Path, final: Path) -> None:
    """Rename the folder ``tmp`` to ``final``. A folder already at ``final`` is first renamed aside (to
    ``tmp``'s name + ".old", so whatever cleans ``tmp``'s leftovers cleans it too) and deleted once the new
    one is in place; if the second rename fails, it is put back."""
    aside = None
    if os.path.lexists(final):
        aside = tmp.with_name(tmp.name + ".old")
        os.rename(final, aside)
    try:
        os.rename(tmp, final)
    except BaseException:
        if aside is not None:
            os.rename(aside, final)
        raise
    fsync_folder(final.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def write_folder(final: str | os.PathLike, write: Callable[[Path], None], *, overwrite: bool = False,
                 keep: Iterable[tuple[str, Path]] = (), what: str = "export", info: dict | None = None) -> Path:
    """Make the folder ``final`` with ``write(tmp)``: ``tmp`` is a new hidden folder beside ``final``, its
    files are synced, the marker (``info`` and the list of files) is added, then it is renamed into place.
    ``final`` is checked first (``check_replaceable``); on any error ``final`` is as it was."""
    keep = list(keep)
    check_replaceable(final, overwrite=overwrite, keep=keep, what=what)
    final = Path(final)
    with writing(final.parent):
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        write(tmp)
        names = sorted(os.listdir(tmp))
        marker = {**(info or {}), "written_by": "attnkit export", "files": names}
        with writing(tmp / MARKER):
            (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        for name in [*names, MARKER]:
            with writing(tmp / name), open(tmp / name, "rb") as f:
                os.fsync(f.fileno())
        check_replaceable(final, overwrite=overwrite, keep=keep, what=what)  # again: it may have changed meanwhile
        with writing(final):
            swap_in(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
