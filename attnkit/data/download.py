"""Where datasets live, and fetching a file from its public source with a cache and a sha256 check.

The datasets root (each dataset a folder in it: ``ud_english_ewt/``, ``sst2/``, ``mnist/``, ``fsdd/``,
``planetoid/``) is, first found:

1. a path given explicitly (``--data-dir`` on the command line);
2. the ``ATTNKIT_DATA`` environment variable;
3. ``../shared/data`` next to the repository root when attnkit runs from a source checkout (found from
   the package's own location, so it does not depend on the current directory);
4. the download cache, ``$ATTNKIT_CACHE`` (default ``$XDG_CACHE_HOME/attnkit`` or ``~/.cache/attnkit``).

Downloads (``--download``) go to the cache and are checked against a pinned sha256; a dataset
already in the cache is found there without ``--download``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path

__all__ = ["data_root", "source_checkout", "cache_dir", "missing_data", "sha256_file", "fetch"]


def source_checkout() -> Path | None:
    """The repository root when this attnkit is imported from a source checkout, else None."""
    root = Path(__file__).resolve().parents[2]  # attnkit/data/download.py -> the folder holding attnkit/
    try:
        project = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "attnkit"' in project else None


def data_root(path: str | os.PathLike | None = None) -> Path:
    """The datasets root: ``path``, ``$ATTNKIT_DATA``, the checkout's ``../shared/data``, or the cache."""
    if path is not None:
        return Path(path)
    env = os.environ.get("ATTNKIT_DATA")
    if env:
        return Path(env)
    repo = source_checkout()
    return repo.parent / "shared" / "data" if repo is not None else cache_dir()


def cache_dir(name: str = "") -> Path:
    """``$ATTNKIT_CACHE/name`` (default ``$XDG_CACHE_HOME/attnkit/name``, ``~/.cache/attnkit/name``); not created."""
    root = os.environ.get("ATTNKIT_CACHE")
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnkit"
    return Path(root) / name


def missing_data(dataset: str, what: str, looked: str | os.PathLike, folder: str, *,
                 path_option: str | None = None) -> FileNotFoundError:
    """The error for a dataset that is not there, naming every way to provide it.

    ``folder`` is the dataset's folder name under the datasets root; ``path_option`` a task option that
    takes the file or folder itself (e.g. ``--train FILE``)."""
    ways = [f"--data-dir DIR or ATTNKIT_DATA=DIR (DIR holding {folder}/)"]
    if path_option:
        ways.append(path_option)
    ways.append(f"--download (fetches it into {cache_dir(folder)})")
    return FileNotFoundError(f"{dataset}: {what} not found in {looked}; provide it with " + ", ".join(ways[:-1])
                             + f", or {ways[-1]}")


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
