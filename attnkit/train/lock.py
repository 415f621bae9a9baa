"""One writer per run folder: ``run_lock(out)`` holds an OS file lock while a training writes into ``out``.

The lock is ``fcntl.flock`` on ``out/.attnkit-lock``, which holds the PID (and host) of its holder. The OS
releases it when the holder exits in any way, ``kill -9`` included, so a lock is never left stale: the
file may stay behind, but an unlocked file does not stop anyone. A second writer is refused at once with
one line naming the PID that holds it (``RunLocked``, a ValueError). The holder deletes the file when it
is done; a writer that locked a file just deleted by its holder takes the new one instead (the inode is
checked), so two writers never both hold it.

Within one process the lock is re-entrant (``attnkit train`` holds it around the task's own files, such as
``bpe.json``, and ``Trainer.fit`` takes it again). Under torchrun only rank 0, the rank that writes, takes
it; every rank learns from rank 0 whether it got it, so all ranks go on, or all refuse with the same line.
Where ``fcntl`` is missing (Windows) or the file system has no locks, nothing is locked.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from contextlib import contextmanager
from pathlib import Path

from ..outputs import writing
from . import distributed as dist

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["LOCK_FILE", "RunLocked", "run_lock", "holder"]

LOCK_FILE = ".attnkit-lock"
_UNSUPPORTED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
_held: dict[str, list[int]] = {}  # the real path of a locked file -> [its descriptor, how many holders here]


class RunLocked(ValueError):
    """Another process writes into the run folder."""


def holder(folder: str | os.PathLike) -> str:
    """Who holds the lock of ``folder``, as written in its lock file: "PID 123 on host h", or "unknown"."""
    try:
        data = json.loads((Path(folder) / LOCK_FILE).read_text(encoding="utf-8"))
        pid, host = int(data["pid"]), str(data["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return "PID unknown"
    return f"PID {pid}" + ("" if host == socket.gethostname() else f" on host {host}")


def _acquire(path: Path) -> int | None:
    """A descriptor of ``path`` locked by this process, or None when the file system cannot lock."""
    while True:
        with writing(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RunLocked(str(path.parent)) from None
            if e.errno in _UNSUPPORTED:
                return None
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:  # not a file its holder deleted just before we locked it
            break
        os.close(fd)
    info = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n"
    with writing(path):
        os.ftruncate(fd, 0)
        os.write(fd, info.encode())
    return fd


def _release(path: Path, fd: int | None) -> None:
    if fd is None:
        return
    try:
        path.unlink(missing_ok=True)  # while still locked: the next writer creates a fresh file
    except OSError:
        pass
    os.close(fd)


def _enter(folder: Path, path: Path) -> str:
    """Lock ``path`` (re-entrant within the process); the key of ``_held`` to release."""
    with writing(folder):
        folder.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(path)
    if key in _held:
        _held[key][1] += 1
    else:
        _held[key] = [_acquire(path), 1]
    return key


@contextmanager
def run_lock(folder: str | os.PathLike, what: str = "train", *, create: bool = True):
    """Hold ``folder``'s lock for the block; RunLocked if another process holds it. ``create``: make the
    folder if missing (else a missing folder is not locked: there is nothing in it to protect, and the
    caller says it is missing). Every torchrun rank calls it at the same point; only rank 0 locks."""
    folder = Path(folder)
    path = folder / LOCK_FILE
    key, failed = None, None
    if dist.is_main() and fcntl is not None and (create or folder.is_dir()):
        try:
            key = _enter(folder, path)
        except RunLocked:
            failed = RunLocked(f"{what}: {folder} is in use: another process ({holder(folder)}) is writing into "
                               f"it and holds {path}; wait for it to end, or use another --out")
        except Exception as e:  # e.g. a read-only folder: raised after the other ranks know
            failed = e
    if dist.broadcast_flag(failed is not None):  # all ranks go on or stop together: none waits for rank 0
        raise failed if failed is not None else RunLocked(f"{what}: {folder} is in use or cannot be locked "
                                                          f"(rank 0 says why)")
    try:
        yield
    finally:
        if key is not None:
            _held[key][1] -= 1
            if _held[key][1] == 0:
                _release(path, _held.pop(key)[0])
