"""Sentence classification data from two-column TSV files (SST-2 from GLUE, or any ``text<TAB>label``).

``read_tsv(path)`` -> list of ``LabelledText(text, label, line)``. A header row ``sentence<TAB>label``
is skipped. A row without exactly two tab-separated fields, or with an empty text, raises
``ValueError("file:line: ...")``. ``.gz`` files are read directly.

``sst2_path(split)`` finds ``<data root>/sst2/{train,dev}.tsv.gz``, or downloads GLUE's SST-2 zip
into the cache (``download=True``) and checks its sha256.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .download import cache_dir, data_root, fetch, missing_data
from .text import utf8_lines

__all__ = ["LabelledText", "read_tsv", "sst2_path", "SST2_URL"]

SST2_URL = "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip"  # GLUE's canonical download
SST2_SHA256 = None  # the zip's digest is not published; the extracted files are checked instead
SST2_FILES = {  # sha256 of the uncompressed TSVs, from ../shared/data/sst2/SOURCE.md
    "train": "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
    "dev": "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
}
HEADERS = {("sentence", "label"), ("text", "label")}


@dataclass(frozen=True)
class LabelledText:
    text: str
    label: str
    line: int
    source: str = ""


def read_tsv(path: str | os.PathLike, *, limit: int | None = None) -> list[LabelledText]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"read_tsv: {path} does not exist")
    out: list[LabelledText] = []
    try:
        for lineno, line in utf8_lines(path):
            if not line.strip():
                continue
            cols = line.split("\t")
            if lineno == 1 and tuple(c.strip().lower() for c in cols) in HEADERS:
                continue
            if len(cols) != 2:
                raise ValueError(f"{path}:{lineno}: expected 2 tab-separated fields (text, label), "
                                 f"got {len(cols)}: {line[:80]!r}")
            text, label = cols[0].strip(), cols[1].strip()
            if not text or not label:
                raise ValueError(f"{path}:{lineno}: empty {'text' if not text else 'label'}")
            out.append(LabelledText(text, label, lineno, str(path)))
            if limit and len(out) >= limit:
                break
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: cannot read: {e}") from None
    if not out:
        raise ValueError(f"{path}: no rows found (empty dataset)")
    return out


def sst2_path(split: str, root: str | os.PathLike | None = None, *, download: bool = False) -> Path:
    """SST-2's ``split`` (train / dev) TSV: the data root's copy, else GLUE's zip in the cache."""
    if split not in SST2_FILES:
        raise ValueError(f"sst2_path: `split` must be one of {sorted(SST2_FILES)}, got {split!r}")
    folder = data_root(root) / "sst2"
    for cand in (folder / f"{split}.tsv.gz", folder / f"{split}.tsv"):
        if cand.exists():
            return cand
    cache = cache_dir("sst2")
    target = cache / f"{split}.tsv"
    if target.exists():
        return target
    if not download:
        raise missing_data("SST-2", f"{split}.tsv", folder, "sst2", path_option="--train/--dev FILE")
    zpath = fetch(SST2_URL, cache / "SST-2.zip", SST2_SHA256)
    with zipfile.ZipFile(zpath) as z:
        data = z.read(f"SST-2/{split}.tsv")
    import hashlib

    if hashlib.sha256(data).hexdigest() != SST2_FILES[split]:
        raise ValueError(f"SST-2: {split}.tsv from {SST2_URL} does not match the published sha256")
    target.write_bytes(data)
    return target
