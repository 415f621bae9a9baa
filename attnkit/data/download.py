"""Where datasets live, and fetching a file from its public source with a cache and a sha256 check.

Lookup order for a dataset's directory: an explicit path, then the ``ATTNKIT_DATA`` environment
variable, then ``../shared/data`` relative to the current directory (the repo root). Downloads go
to ``ATTNKIT_CACHE`` (default ``~/.cache/attnkit``) and are checked against a pinned sha256.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path

__all__ = ["DEFAULT_DATA_ROOT", "data_root", "cache_dir", "sha256_file", "fetch"]

DEFAULT_DATA_ROOT = Path("..") / "shared" / "data"


def data_root(path: str | os.PathLike | None = None) -> Path:
    """The datasets root: ``path`` if given, else ``$ATTNKIT_DATA``, else ``../shared/data``."""
    if path is not None:
        return Path(path)
    env = os.environ.get("ATTNKIT_DATA")
    return Path(env) if env else DEFAULT_DATA_ROOT


def cache_dir(name: str) -> Path:
    """``$ATTNKIT_CACHE/name`` (default ``~/.cache/attnkit/name``); not created here."""
    root = os.environ.get("ATTNKIT_CACHE") or Path.home() / ".cache" / "attnkit"
    return Path(root) / name


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def fetch(url: str, dest: str | os.PathLike, sha256: str | None, *, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` unless a file with the right checksum is already there.

    The bytes go to a temporary file next to ``dest``, are checked against ``sha256`` (skipped if
    None), then moved into place, so a failed or tampered download never leaves a file behind.
    Raises ValueError on a checksum mismatch, naming the url and both digests.
    """
    dest = Path(dest)
    if dest.exists() and (sha256 is None or sha256_file(dest) == sha256):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310
            while block := resp.read(1 << 20):
                out.write(block)
        got = sha256_file(tmp)
        if sha256 is not None and got != sha256:
            raise ValueError(f"download: {url} has sha256 {got}, expected {sha256}; not saved to {dest}")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest
