"""Free Spoken Digit Dataset: 3000 recordings ``{digit}_{speaker}_{index}.wav`` (8 kHz mono 16-bit).

Sources, in order: ``path`` (a ``recordings.tar.gz``, a GitHub archive of the repository, or a
folder of WAVs), else ``<datasets root>/fsdd/recordings.tar.gz`` or ``.../fsdd/recordings/``
(``attnkit.data.download.data_root``),
else the download cache; with ``download=True`` a missing archive is fetched from GitHub
(Jakobovski/free-spoken-digit-dataset at a pinned commit) into the cache. Archives are read
member by member (nothing is extracted to disk); only names matching the FSDD pattern are read.
A full set is checked against a content digest (sha256 over names and per-file sha256).

Splits: the official one puts ``index`` 0-4 in test (300) and 5-49 in train (2700);
``speaker_split`` holds one speaker out entirely.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .download import cache_dir, data_root, fetch, missing_data

__all__ = ["Recording", "load_fsdd", "official_split", "speaker_split", "SPEAKERS", "SOURCE_URL",
           "content_digest"]

COMMIT = "26eb9aaf76e81b692f806f9140c2d2777410d7a1"
SOURCE_URL = f"https://github.com/Jakobovski/free-spoken-digit-dataset/archive/{COMMIT}.tar.gz"
#: sha256 over "name sha256(bytes)\n" for the 3000 recordings sorted by name (independent of tar packing)
CONTENT_SHA256 = "dbd573d7cafe79c4b49f65718115e1304e24e067fa39eff18a660dc6cb9c360f"
SPEAKERS = ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")
NAME_RE = re.compile(r"(?:^|/)(\d)_([a-z]+)_(\d+)\.wav$")


@dataclass(frozen=True, eq=False)
class Recording:
    name: str  # file name, e.g. "3_theo_12.wav"
    digit: int
    speaker: str
    index: int
    samples: np.ndarray  # (S,) float32 at 8 kHz


def content_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name} {hashlib.sha256(files[name]).hexdigest()}\n".encode())
    return h.hexdigest()


def _read_archive(path: Path) -> dict[str, bytes]:
    try:
        with tarfile.open(path, "r:*") as tar:
            out = {}
            for m in tar:
                match = NAME_RE.search(m.name)
                if m.isfile() and match and "/recordings/" in f"/{m.name}":
                    out[m.name.rsplit("/", 1)[-1]] = tar.extractfile(m).read()
            return out
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ValueError(f"fsdd: {path} is not a readable tar archive ({e})") from e


def _read_folder(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if NAME_RE.search(p.name) and p.is_file()}


def _locate(path: str | os.PathLike | None, download: bool, root: str | os.PathLike | None = None) -> Path:
    if path is not None:
        p = Path(path)
        if p.is_dir() and (p / "recordings.tar.gz").exists():
            return p / "recordings.tar.gz"
        if p.is_dir() and (p / "recordings").is_dir():
            return p / "recordings"
        if p.exists():
            return p
        raise FileNotFoundError(f"fsdd: {p} does not exist")
    p = data_root(root) / "fsdd" / "recordings.tar.gz"
    for cand in (p, p.parent / "recordings"):  # the archive, or its recordings extracted
        if cand.exists():
            return cand
    cached = cache_dir("fsdd") / f"free-spoken-digit-dataset-{COMMIT}.tar.gz"
    if cached.exists() or download:
        # GitHub archives are not byte-stable; the recordings are checked by content digest instead.
        return fetch(SOURCE_URL, cached, None) if download else cached
    raise missing_data("fsdd", p.name, p.parent, "fsdd", path_option="--data PATH (the archive or a folder of WAVs)")


def load_fsdd(path: str | os.PathLike | None = None, *, download: bool = False, sample_rate: int = 8000,
              verify: bool = True, root: str | os.PathLike | None = None) -> list[Recording]:
    """All recordings, sorted by name. A full set of 3000 is verified against the pinned content digest
    (``verify=False`` skips it); smaller sets (tests, subsets) are read as they are."""
    from .audio import read_wav  # torch: imported here, so that SPEAKERS is read without it (--help)

    src = _locate(path, download, root)
    files = _read_folder(src) if src.is_dir() else _read_archive(src)
    if not files:
        raise ValueError(f"fsdd: {src} holds no recordings named {{digit}}_{{speaker}}_{{index}}.wav")
    if verify and len(files) == 3000 and content_digest(files) != CONTENT_SHA256:
        raise ValueError(f"fsdd: the recordings in {src} do not match the pinned content digest")
    out = []
    for name in sorted(files):
        digit, speaker, index = NAME_RE.search(name).groups()
        x, _ = read_wav(files[name], sample_rate=sample_rate, name=f"{src}:{name}")
        out.append(Recording(name, int(digit), speaker, int(index), x))
    return out


def official_split(recs: list[Recording]) -> tuple[list[Recording], list[Recording]]:
    """(train, test): index 0-4 is test, as in the dataset's README."""
    return [r for r in recs if r.index >= 5], [r for r in recs if r.index < 5]


def speaker_split(recs: list[Recording], speaker: str) -> tuple[list[Recording], list[Recording]]:
    """(train, test): every recording of ``speaker`` is test, all others train."""
    known = sorted({r.speaker for r in recs})
    if speaker not in known:
        raise ValueError(f"fsdd: unknown speaker {speaker!r}; known: {known}")
    return [r for r in recs if r.speaker != speaker], [r for r in recs if r.speaker == speaker]
