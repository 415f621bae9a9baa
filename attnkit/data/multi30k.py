"""Multi30k Task 1 (English-German image captions), and parallel text files in general.

``multi30k_path(split, lang)`` finds ``<data root>/multi30k/{split}.{lang}.gz`` (splits: train 29,000
pairs, val 1,014, test_2016_flickr 1,000), or downloads the file from the dataset's GitHub repository
at a pinned commit into the cache (``download=True``), checking the sha256 in ../shared/data/multi30k/SOURCE.md.

``read_parallel(src_path, tgt_path)`` -> ``Corpus`` of aligned (source, target) lines. Files must have
the same number of lines (else a ValueError naming both files and both counts); pairs with an empty
side are dropped and counted in ``Corpus.skipped`` (their line numbers in ``Corpus.empty_lines``).
``read_lines(path)`` reads one side (for translating a file: empty lines are kept).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from pathlib import Path

from .download import cache_dir, data_root, fetch

__all__ = ["Corpus", "read_lines", "read_parallel", "multi30k_path", "multi30k", "SPLITS", "LANGS",
           "MULTI30K_URL", "MULTI30K_FILES"]

SPLITS = ("train", "val", "test_2016_flickr")
ALIASES = {"dev": "val", "valid": "val", "test": "test_2016_flickr"}
LANGS = ("en", "de")
_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
MULTI30K_URL = f"https://raw.githubusercontent.com/multi30k/dataset/{_COMMIT}/data/task1/raw/"
# file -> sha256 of the .gz file, from ../shared/data/multi30k/SOURCE.md
MULTI30K_FILES = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
}


@dataclass
class Corpus:
    """Aligned sentence pairs; ``lines[i]`` is the 1-based line of pair i in both files."""

    src: list[str]
    tgt: list[str]
    lines: list[int]
    source: str = ""
    empty_lines: list[int] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return len(self.empty_lines)

    def __len__(self) -> int:
        return len(self.src)


def read_lines(path: str | os.PathLike, *, limit: int | None = None) -> list[str]:
    """The lines of a UTF-8 text file (``.gz`` read directly), without line ends; empty lines kept."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"read_lines: {path} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    out: list[str] = []
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as f:
            for raw in f:
                out.append(raw.rstrip("\n").rstrip("\r"))
                if limit and len(out) >= limit:
                    break
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e})") from None
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: cannot read: {e}") from None
    return out


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike, *, limit: int | None = None) -> Corpus:
    """Aligned lines of two files (see the module doc). ``limit``: the first N lines only."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise ValueError(f"parallel data: {src_path} has {len(src)} lines but {tgt_path} has {len(tgt)} lines; "
                         "line i of one must translate line i of the other")
    if limit:
        src, tgt = src[:limit], tgt[:limit]
    corpus = Corpus([], [], [], source=f"{src_path} + {tgt_path}")
    for i, (s, t) in enumerate(zip(src, tgt), 1):
        s, t = s.strip(), t.strip()
        if not s or not t:
            corpus.empty_lines.append(i)
            continue
        corpus.src.append(s)
        corpus.tgt.append(t)
        corpus.lines.append(i)
    if not corpus.src:
        raise ValueError(f"parallel data: no non-empty pairs in {src_path} and {tgt_path}")
    return corpus


def split_name(split: str) -> str:
    split = ALIASES.get(split, split)
    if split not in SPLITS:
        raise ValueError(f"multi30k: `split` must be one of {SPLITS} (or {sorted(ALIASES)}), got {split!r}")
    return split


def multi30k_path(split: str, lang: str, root: str | os.PathLike | None = None, *, download: bool = False) -> Path:
    """The file of ``split`` in ``lang``: the data root's copy, else the cached download."""
    split = split_name(split)
    if lang not in LANGS:
        raise ValueError(f"multi30k: `lang` must be one of {LANGS}, got {lang!r}")
    name = f"{split}.{lang}.gz"
    local = data_root(root) / "multi30k" / name
    if local.exists():
        return local
    cached = cache_dir("multi30k") / name
    if not download and not cached.exists():
        raise FileNotFoundError(f"Multi30k: {name} is not in {local.parent}; set --data-root / $ATTNKIT_DATA, "
                                "or pass --download to fetch it")
    return fetch(MULTI30K_URL + name, cached, MULTI30K_FILES[name])


def multi30k(split: str, src: str = "de", tgt: str = "en", root: str | os.PathLike | None = None, *,
             download: bool = False, limit: int | None = None) -> Corpus:
    """Multi30k pairs of ``split`` from ``src`` to ``tgt``."""
    if src == tgt:
        raise ValueError(f"multi30k: source and target language are both {src!r}")
    return read_parallel(multi30k_path(split, src, root, download=download),
                         multi30k_path(split, tgt, root, download=download), limit=limit)
