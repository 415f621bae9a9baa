"""Sequence-labelling data from CoNLL-U files (UD), read with the ``conllu`` package.

``read_conllu(path, field="upos")`` -> list of ``TaggedSentence(words, tags, line)``. Multiword-token
lines (``3-4``) and empty nodes (``8.1``) are skipped, as for basic tagging. ``.gz`` files are read
directly. A malformed line raises ``ValueError("file:line: ...")``, not a stack trace.

``ewt_path(split)`` finds UD English EWT under the data root, or downloads it (``download=True``)
from the treebank's GitHub release tag into the cache, checking the published sha256.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .download import cache_dir, data_root, fetch, missing_data
from .text import utf8_lines

__all__ = ["TaggedSentence", "read_conllu", "ewt_path", "EWT_FILES", "FIELDS", "UPOS"]

FIELDS = ("upos", "xpos")
UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X")  # the 17 universal POS tags
_ID = re.compile(r"^(\d+)$|^(\d+)-(\d+)$|^(\d+)\.(\d+)$")
EWT_URL = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16/"
# split -> (file name, sha256 of the uncompressed file, from ../shared/data/ud_english_ewt/SOURCE.md)
EWT_FILES = {
    "train": ("en_ewt-ud-train.conllu", "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"),
    "dev": ("en_ewt-ud-dev.conllu", "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6"),
    "test": ("en_ewt-ud-test.conllu", "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"),
}


@dataclass(frozen=True)
class TaggedSentence:
    words: tuple[str, ...]
    tags: tuple[str, ...]
    line: int  # 1-based line where the sentence starts, for error messages
    source: str = ""
    lines: tuple[int, ...] = ()  # 1-based line of each word


def _check_line(path: Path, lineno: int, line: str) -> bool:
    """True for a syntactic-word line; False for multiword / empty-node lines; raises if malformed."""
    cols = line.split("\t")
    if len(cols) != 10:
        raise ValueError(f"{path}:{lineno}: a CoNLL-U token line needs 10 tab-separated columns, got {len(cols)}: "
                         f"{line[:80]!r}")
    m = _ID.match(cols[0])
    if not m:
        raise ValueError(f"{path}:{lineno}: bad ID {cols[0]!r} (expected 1, 3-4 or 8.1)")
    return m.group(1) is not None


def read_conllu(path: str | os.PathLike, field: str = "upos", *, limit: int | None = None) -> list[TaggedSentence]:
    """Sentences with the words' FORM and their ``field`` (upos or xpos)."""
    import conllu

    if field not in FIELDS:
        raise ValueError(f"read_conllu: `field` must be one of {FIELDS}, got {field!r}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"read_conllu: {path} does not exist")
    out: list[TaggedSentence] = []
    block: list[str] = []
    start = 0
    word_lines: list[int] = []

    def flush():
        nonlocal block, word_lines
        if not any(ln and not ln.startswith("#") for ln in block):
            block, word_lines = [], []
            return
        try:
            (tl,) = conllu.parse("\n".join(block) + "\n\n")
        except Exception as e:  # the conllu package's ParseException and friends
            raise ValueError(f"{path}:{start}: cannot parse sentence: {e}") from None
        words, tags = [], []
        for tok in tl:
            if not isinstance(tok["id"], int):
                continue
            tag = tok[field]
            if tag is None or tag == "_":
                raise ValueError(f"{path}:{start}: word {tok['form']!r} (ID {tok['id']}) has no {field.upper()}")
            words.append(tok["form"])
            tags.append(tag)
        out.append(TaggedSentence(tuple(words), tuple(tags), start, str(path), tuple(word_lines)))
        block, word_lines = [], []

    try:
        for lineno, line in utf8_lines(path):
            if not line.strip():
                flush()
                if limit and len(out) >= limit:
                    break
                continue
            if not block:
                start = lineno
            if not line.startswith("#") and _check_line(path, lineno, line):
                word_lines.append(lineno)
            block.append(line)
        flush()
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: cannot read: {e}") from None
    if not out:
        raise ValueError(f"{path}: no sentences found (empty dataset)")
    return out[:limit] if limit else out


def ewt_path(split: str, root: str | os.PathLike | None = None, *, download: bool = False) -> Path:
    """UD English EWT's ``split`` file: ``<data root>/ud_english_ewt/*.conllu.gz``, else the download cache."""
    if split not in EWT_FILES:
        raise ValueError(f"ewt_path: `split` must be one of {sorted(EWT_FILES)}, got {split!r}")
    name, sha = EWT_FILES[split]
    folder = data_root(root) / "ud_english_ewt"
    for cand in (folder / (name + ".gz"), folder / name):
        if cand.exists():
            return cand
    cached = cache_dir("ud_english_ewt") / name
    if cached.exists() or download:
        return fetch(EWT_URL + name, cached, sha)
    raise missing_data("UD English EWT", name, folder, "ud_english_ewt", path_option="--train/--dev/--test FILE")
