"""Sequence-level knowledge distillation (Kim and Rush 2016): the training targets of a NAT model are the
autoregressive teacher's beam-search translations of the training sources.

NAT chooses every token independently; a real corpus often has several good translations of one
sentence, and a model that mixes them writes "a man a riding riding". The teacher's outputs are one
consistent, less varied translation per sentence, which a NAT model learns much better.

``distill(teacher_run, sources, folder, beam=5)`` decodes in batches (sentences sorted by length)
and caches the result in ``folder/distill/<key>.txt`` with a JSON note, where the key covers the
teacher's weights, the sources and the beam size: a second run (or ``--resume``) reads the file
instead of decoding again. Finished chunks are appended to ``<key>.partial.jsonl`` as they come, so
a killed distillation continues where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from ..train.checkpoint import CheckpointError, load_meta, sha256
from .translate_ar import AR
from .translation import load_run

__all__ = ["distill", "open_teacher", "DISTILL_DIR"]

DISTILL_DIR = "distill"
CHUNK = 1024  # sentences decoded between two writes to the partial file


def open_teacher(run: str | os.PathLike, src_lang: str, tgt_lang: str):
    """The teacher run's best checkpoint as (Translator, checkpoint folder); a clear error unless it is an
    autoregressive translation run of the same language pair."""
    folder, meta = load_meta(Path(run), which="best")
    if meta.get("task") != "translate":
        raise CheckpointError(f"--teacher: {folder} is a {meta.get('task')!r} run, not a translation run")
    if meta.get("decoder", "ar") != "ar":
        raise CheckpointError(f"--teacher: {folder} is a non-autoregressive ({meta.get('decoder')}) run; the teacher "
                              "must be autoregressive (trained with --decoder ar)")
    if (meta.get("src_lang"), meta.get("tgt_lang")) != (src_lang, tgt_lang):
        raise CheckpointError(f"--teacher: {folder} translates {meta.get('src_lang')}->{meta.get('tgt_lang')}, "
                              f"this run {src_lang}->{tgt_lang}")
    return load_run(folder, meta, AR), folder



def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_partial(path: Path, n: int) -> dict[int, str]:
    """Complete records of the partial file (a line cut by a kill is dropped)."""
    done: dict[int, str] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("i"), int) and 0 <= rec["i"] < n:
            done[rec["i"]] = str(rec.get("t", ""))
    return done


def distill(teacher_run: str | os.PathLike, sources: list[str], folder: str | os.PathLike, *, src_lang: str,
            tgt_lang: str, beam: int = 5, batch_size: int = 64, progress: bool = True) -> tuple[list[str], dict]:
    """The teacher's beam-``beam`` translations of ``sources`` (cached in ``folder/distill``) and a note
    (teacher, weights sha256, beam, cache file, seconds spent decoding)."""
    if not isinstance(beam, int) or beam < 1:
        raise ValueError(f"distill: `beam` must be an integer >= 1, got {beam!r}")
    translator, ckpt = open_teacher(teacher_run, src_lang, tgt_lang)
    weights_sha = sha256(ckpt / "model.safetensors")
    src_sha = hashlib.sha256("\n".join(sources).encode("utf-8")).hexdigest()
    key = hashlib.sha256(f"{weights_sha}:{src_sha}:beam{beam}".encode()).hexdigest()[:16]
    cache_dir = Path(folder) / DISTILL_DIR
    cache_dir.mkdir(parents=True, exist_ok=True)
    final, note_path, partial = cache_dir / f"{key}.txt", cache_dir / f"{key}.json", cache_dir / f"{key}.partial.jsonl"
    note = {"teacher": str(ckpt), "teacher_weights_sha256": weights_sha, "sources": len(sources),
            "sources_sha256": src_sha, "beam": beam, "file": str(final.relative_to(Path(folder)))}
    if final.exists() and note_path.exists():
        lines = final.read_text(encoding="utf-8").split("\n")[:-1]
        if len(lines) == len(sources):
            return lines, {**json.loads(note_path.read_text(encoding="utf-8")), "cached": True}
    done = _read_partial(partial, len(sources))
    todo = sorted((i for i in range(len(sources)) if i not in done), key=lambda i: len(sources[i]))
    t0 = time.perf_counter()
    with open(partial, "a", encoding="utf-8") as f:
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start:start + CHUNK]
            outs = translator.translate([sources[i] for i in chunk], num_beams=beam, batch_size=batch_size)
            f.write("".join(json.dumps({"i": i, "t": t}, ensure_ascii=False) + "\n" for i, t in zip(chunk, outs)))
            f.flush()
            os.fsync(f.fileno())
            done.update(zip(chunk, outs))
            if progress:
                print(f"distill: {len(done)}/{len(sources)} sentences, beam {beam} "
                      f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    lines = [done[i].replace("\n", " ") for i in range(len(sources))]
    note["seconds"] = round(time.perf_counter() - t0, 1)
    _atomic_write(final, "".join(t + "\n" for t in lines))
    _atomic_write(note_path, json.dumps(note, indent=1) + "\n")
    partial.unlink(missing_ok=True)
    return lines, {**note, "cached": False}
