"""IMDb movie reviews (Maas et al. 2011) as byte sequences: LRA's "Text" task (byte-level classification).

The data: ``aclImdb/{train,test}/{pos,neg}/*.txt`` (25,000 reviews per split, half positive), from a
local folder (default ``<data root>/imdb``, holding ``aclImdb/``) or the canonical Stanford download
(``download=True``: ``aclImdb_v1.tar.gz``, 84 MB, checked against its published sha256, unpacked
into the cache). A review becomes its UTF-8 bytes, token = byte + 1 (0 is padding), cut to
``max_length`` (LRA: 4,000; LRA-lite: 1,000). Label 1 = positive.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

from .download import cache_dir, data_root, fetch

__all__ = ["IMDB_URL", "IMDB_SHA256", "imdb_folder", "load_imdb", "byte_tokens"]

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
IMDB_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"


def byte_tokens(text: str, max_length: int) -> list[int]:
    """UTF-8 bytes + 1 (0 = padding), at most ``max_length``."""
    return [b + 1 for b in text.encode("utf-8")[:max_length]]


def _has_reviews(root: Path) -> bool:
    return all((root / "aclImdb" / split / label).is_dir() for split in ("train", "test") for label in ("pos", "neg"))


def imdb_folder(folder: str | os.PathLike | None = None, *, download: bool = False) -> Path:
    """The folder holding ``aclImdb/``: ``folder``, ``<data root>/imdb``, or the download cache."""
    for cand in ([Path(folder)] if folder is not None else [data_root() / "imdb", cache_dir("imdb")]):
        if _has_reviews(cand):
            return cand
    if not download:
        where = folder if folder is not None else f"{data_root() / 'imdb'} or {cache_dir('imdb')}"
        raise FileNotFoundError(f"IMDb: no aclImdb/{{train,test}}/{{pos,neg}} in {where}; pass the folder or "
                                f"--download to fetch {IMDB_URL} (84 MB)")
    dest = cache_dir("imdb")
    archive = fetch(IMDB_URL, dest / "aclImdb_v1.tar.gz", IMDB_SHA256)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(dest, filter="data")  # no absolute paths, links out of dest or devices
    return dest


def load_imdb(folder: str | os.PathLike | None = None, *, max_length: int = 1000, download: bool = False,
              limit: int | None = None) -> dict[str, list[tuple[list[int], int]]]:
    """{"train", "test"}: [(byte tokens, label)], sorted by file name, positives then negatives interleaved
    by position (so ``limit`` keeps both classes)."""
    root = imdb_folder(folder, download=download) / "aclImdb"
    out = {}
    for split in ("train", "test"):
        per_label = []
        for label, name in ((1, "pos"), (0, "neg")):
            files = sorted((root / split / name).glob("*.txt"))
            per_label.append([(f, label) for f in files])
        mixed = [x for pair in zip(*per_label) for x in pair]
        if limit is not None:
            mixed = mixed[:limit]
        out[split] = [(byte_tokens(f.read_text(encoding="utf-8", errors="replace"), max_length), y) for f, y in mixed]
    return out
