"""Atomic, checksummed checkpoints: weights in safetensors, everything else in JSON. No pickle.

Layout of a run folder ``out/``::

    out/ckpt-00001200/model.safetensors     the weights (float tensors, contiguous)
    out/ckpt-00001200/trainer.safetensors   optimiser moments, RNG states: the tensors of the trainer state
    out/ckpt-00001200/trainer.json          the rest of it: step / epoch / batch, best, scheduler, ...
    out/ckpt-00001200/meta.json             format version, task, model config, vocab, labels, metrics,
                                            and the sha256 of every other file of the folder
    out/latest.json                         {"path": "ckpt-00001200", ...}: the newest complete checkpoint
    out/best.json                           the checkpoint with the best dev metric

A checkpoint is written into a hidden temporary folder, flushed, then renamed into place; only then
is ``latest.json`` replaced (``os.replace``, atomic). A kill or a full disk mid-save leaves at most
a ``.tmp-*`` folder or file that is ignored and cleaned next time: the previous checkpoint stays the
latest. Loading checks every file against its recorded sha256 first; any problem is one
``CheckpointError`` line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.jsonfile import read_json
from ..outputs import swap_in, writing

if TYPE_CHECKING:
    from torch import nn

FORMAT_VERSION = 2  # 1: trainer state in trainer.pt (a pickle, no longer read), no checksums
WEIGHTS, META, STATE_TENSORS, STATE_JSON = "model.safetensors", "meta.json", "trainer.safetensors", "trainer.json"
OLD_TRAINER = "trainer.pt"
RUN_FILES = ("latest.json", "best.json", "metrics.jsonl", "curves.png", "result.json")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: missing, damaged, from another task, or from a newer format."""


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with writing(tmp), open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_folder(final: Path):
    """Yield a temporary folder beside ``final``; on success its files are synced and it replaces
    ``final`` in one rename (a reader sees the old folder or the whole new one, never a part); on any
    error it is removed and ``final`` is untouched. An OSError (a full disk) names the file it was writing.
    A folder already at ``final`` (the same step saved again, e.g. Ctrl-C right after a save, or a new
    average) is renamed aside and deleted only once the new one is in place (``outputs.swap_in``)."""
    tmp = final.parent / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
    with writing(tmp):
        tmp.mkdir()
    try:
        yield tmp
        for p in tmp.iterdir():
            with writing(p), open(p, "rb") as f:
                os.fsync(f.fileno())
        with writing(final):
            swap_in(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_checkpoint(out_dir: str | os.PathLike, model: nn.Module, meta: dict, *, step: int,
                    trainer_state: dict | None = None, best: bool = False, keep: int = 2) -> Path:
    """Write ``out_dir/ckpt-{step}`` atomically and point ``latest.json`` (and ``best.json``) at it.

    ``meta`` must hold ``task``; it is stored with ``format_version``, ``step`` and the sha256 of
    every file. ``trainer_state``: nested dicts / lists / tuples of tensors and JSON values (see
    ``attnkit.train.state``). Keeps the ``keep`` newest checkpoints plus the best one.
    """
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = f"ckpt-{step:08d}"
    final = out / name
    with atomic_folder(final) as tmp:
        tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        with writing(tmp / WEIGHTS):
            save_file(tensors, str(tmp / WEIGHTS), metadata={"format_version": str(FORMAT_VERSION)})
        if trainer_state is not None:
            from .state import encode

            doc, state_tensors = encode(trainer_state)
            with writing(tmp / STATE_TENSORS):
                save_file(state_tensors, str(tmp / STATE_TENSORS))
            with writing(tmp / STATE_JSON):
                (tmp / STATE_JSON).write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
        files = {p.name: sha256(p) for p in sorted(tmp.iterdir())}
        full_meta = {**meta, "format_version": FORMAT_VERSION, "step": step, "files": files}
        with writing(tmp / META), open(tmp / META, "w", encoding="utf-8") as f:
            json.dump(full_meta, f, indent=1, sort_keys=True)
    if best:  # before latest.json: whatever latest names, best.json already accounts for it
        _write_json(out / "best.json", {"path": name, "step": step, "metrics": meta.get("metrics", {})})
    _write_json(out / "latest.json", {"path": name, "step": step})
    _prune(out, keep)
    return final


def _pointer(out: Path, which: str) -> str | None:
    """The checkpoint folder name ``out/{which}.json`` holds, or None (missing, unreadable or invalid)."""
    try:
        return _named(out, which)
    except (OSError, ValueError):
        return None


def _named(out: Path, which: str) -> str | None:
    """The checkpoint folder name ``out/{which}.json`` holds; None if there is no such file; a
    CheckpointError naming it if it is not a JSON object whose "path" is a folder name (not a path)."""
    path = out / f"{which}.json"
    if not path.exists():
        return None
    try:
        doc = read_json(path, limit=1 << 20)
    except ValueError as e:
        raise CheckpointError(f"checkpoint: {e}") from None
    name = doc.get("path") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not name or Path(name).name != name or name.startswith(".") or "\\" in name:
        raise CheckpointError(f"checkpoint: {path}: \"path\" must name a checkpoint folder inside {out}, got "
                              f"{name!r:.80}")
    return name


def clean_leftovers(out: Path) -> None:
    """Remove what a killed save or average leaves: ``.tmp-ckpt-*`` and ``.tmp-average-*`` folders (and the
    ``.old`` folders ``swap_in`` renames aside) and ``.*.tmp`` files. Only the run's one writer calls it
    (``attnkit.train.lock``), so none of them is another process's save in progress."""
    for p in [*out.glob(".tmp-ckpt-*"), *out.glob(".tmp-average-*")]:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    for p in [*out.glob(".*.tmp"), *out.glob("*.jsonl.tmp")]:
        p.unlink(missing_ok=True)


def _prune(out: Path, keep: int) -> None:
    ckpts = sorted(p for p in out.glob("ckpt-*") if p.is_dir())
    protected = {_pointer(out, "latest"), _pointer(out, "best")}
    for p in ckpts[:-keep] if keep > 0 else ckpts:
        if p.name not in protected:
            shutil.rmtree(p, ignore_errors=True)
    clean_leftovers(out)


def point_best(out: str | os.PathLike, step: int | None) -> None:
    """Make ``best.json`` name the checkpoint of ``step`` (None: remove it). A resumed run calls it
    with its state's best step, undoing a pointer that a killed run wrote past its last checkpoint."""
    out = Path(out)
    if step is None:
        (out / "best.json").unlink(missing_ok=True)
        return
    name = f"ckpt-{step:08d}"
    if _pointer(out, "best") != name:
        meta = read_meta(out / name)
        _write_json(out / "best.json", {"path": name, "step": step, "metrics": meta.get("metrics", {})})


def existing_run(out: str | os.PathLike) -> str | None:
    """A description of the run ``out`` holds (its checkpoints or metrics), or None."""
    out = Path(out)
    ckpts = sorted(p.name for p in out.glob("ckpt-*") if p.is_dir())
    if ckpts:
        return f"{len(ckpts)} checkpoint(s), the latest {_pointer(out, 'latest') or ckpts[-1]}"
    found = [n for n in RUN_FILES if (out / n).exists()]
    return f"{', '.join(found)}" if found else None


def clear_run(out: str | os.PathLike) -> None:
    """Delete the run in ``out``: its checkpoints and the files the engine writes (nothing else)."""
    out = Path(out)
    for p in out.glob("ckpt-*"):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
    for n in RUN_FILES:
        (out / n).unlink(missing_ok=True)
    clean_leftovers(out)


def resolve(path: str | os.PathLike, which: str = "latest") -> Path:
    """A checkpoint folder from either the folder itself or a run folder (its latest / best)."""
    p = Path(path)
    if (p / META).exists():
        return p
    if not p.exists():
        raise CheckpointError(f"checkpoint: {p} does not exist")
    if not p.is_dir():
        raise CheckpointError(f"checkpoint: {p} is not a folder")
    name = _named(p, which) or _named(p, "latest")
    if name and (p / name / META).exists():
        return p / name
    if name and which == "best" and _named(p, "best"):  # never another checkpoint in its place
        raise CheckpointError(f"checkpoint: {p / 'best.json'} names {name}, which is missing from {p}; "
                              f"use the latest checkpoint instead (--which latest)")
    ckpts = sorted(c for c in p.glob("ckpt-*") if (c / META).exists())
    if not ckpts:
        raise CheckpointError(_not_a_run(p))
    return ckpts[-1]


def _not_a_run(p: Path) -> str:
    """Why ``p`` holds no checkpoint; a model folder (config.json) is told apart from an empty one."""
    config = p / "config.json"
    if not config.exists():
        return f"checkpoint: no checkpoint in {p} (expected {META} or latest.json)"
    try:
        hf = read_json(config)
    except (OSError, ValueError) as e:
        return f"checkpoint: {p} is no attnkit run and its config.json cannot be read: {e}"
    kind = hf.get("model_type") if isinstance(hf, dict) else None
    if kind == "marian":
        return (f"checkpoint: {p} is a Marian model folder, not an attnkit run (no {META} or latest.json); "
                "`attnkit translate` and `attnkit.load_pretrained` read it")
    return (f"checkpoint: {p} is no attnkit run (no {META} or latest.json), and its config.json is not a Marian "
            f"model's (model_type {kind!r:.40}, expected 'marian')")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def read_meta(folder: Path) -> dict:
    """meta.json of a checkpoint folder, checked: a JSON object with the keys its format version needs."""
    path = folder / META
    try:
        meta = read_json(path)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint: {path} is missing") from None
    except ValueError as e:  # not a file, too large, nested too deep, not JSON: the message names the file
        msg = str(e).replace(f"{path}: not valid JSON", f"{path} is not valid JSON")
        raise CheckpointError(f"checkpoint: {msg}") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint: {path} must hold a JSON object, got {type(meta).__name__}")
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"checkpoint: {path} has no valid `format_version` (got {version!r})")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint: {folder} has format version {version!r}; this attnkit reads "
                              f"versions <= {FORMAT_VERSION}. Upgrade attnkit to load it.")
    need = {"task": str, "step": int, **({"files": dict} if version >= 2 else {})}
    for key, kind in need.items():
        if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
            raise CheckpointError(f"checkpoint: {path} lacks a valid `{key}` ({kind.__name__}), "
                                  f"got {meta.get(key)!r}")
    files = meta.get("files", {})
    if not all(isinstance(v, str) and len(v) == 64 for v in files.values()):
        raise CheckpointError(f"checkpoint: {path}: `files` must map file names to sha256 hex digests")
    return meta


def verified(folder: Path, name: str, meta: dict | None = None) -> Path:
    """``folder/name`` after checking it exists and (format >= 2) matches its sha256 in meta.json."""
    meta = read_meta(folder) if meta is None else meta
    path = folder / name
    if not path.is_file():
        raise CheckpointError(f"checkpoint: {path} is missing")
    if meta["format_version"] >= 2:
        want = meta["files"].get(name)
        if want is None:
            raise CheckpointError(f"checkpoint: {path} is not listed in {folder / META}")
        if sha256(path) != want:
            raise CheckpointError(f"checkpoint: {path} is damaged: its sha256 differs from the one recorded in "
                                  f"{META} at save time (truncated, or changed since)")
    return path


def load_meta(path: str | os.PathLike, task: str | None = None, which: str = "latest") -> tuple[Path, dict]:
    """Read and check meta.json: the format version must be known and the task must match."""
    folder = resolve(path, which)
    meta = read_meta(folder)
    if task is not None and meta.get("task") != task:
        raise CheckpointError(f"checkpoint: {folder} was trained for task {meta.get('task')!r}, "
                              f"not {task!r}")
    return folder, meta


def _read_safetensors(path: Path) -> dict:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as e:  # safetensors raises its own error type on a damaged file
        raise CheckpointError(f"checkpoint: {path} cannot be read ({_one_line(e)})") from None


def load_weights(folder: str | os.PathLike, model: nn.Module, *, missing_ok: tuple[str, ...] = (),
                 unused_ok: tuple[str, ...] = ()) -> list[str]:
    """The folder's weights into ``model``, verified; every tensor must fit. ``missing_ok``: name prefixes of
    the model's parameters the folder may lack (they keep their values); ``unused_ok``: name prefixes of the
    folder's tensors the model may lack (left out). Returns the names left as they were."""
    folder = Path(folder)
    state = _read_safetensors(verified(folder, WEIGHTS))
    if unused_ok:
        state = {k: v for k, v in state.items() if not k.startswith(unused_ok)}
    return fill(folder, model, state, missing_ok=missing_ok)


def fill(folder: Path, model: nn.Module, state: dict, *, missing_ok: tuple[str, ...] = ()) -> list[str]:
    """``load_weights`` for weights already read from ``folder``; a NaN or infinite weight is refused (as at save)
    with the tensor's name."""
    import torch

    for name, t in state.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"checkpoint: weights in {folder}: tensor {name} holds NaN or infinite values "
                                  "(attnkit never saves such weights: the file was changed or made elsewhere)")
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint: weights in {folder} do not fit the model: {_one_line(e)}") from None
    missing = list(missing)
    bad = [m for m in missing if not m.startswith(missing_ok)] if missing_ok else missing
    if bad or unexpected:
        raise CheckpointError(f"checkpoint: weights in {folder} do not fit the model: missing {bad[:5]}, "
                              f"unexpected {list(unexpected)[:5]}")
    return missing


def load_trainer_state(folder: str | os.PathLike) -> dict:
    """The ``trainer_state`` given to ``save_checkpoint``, verified. Never unpickles anything."""
    folder = Path(folder)
    meta = read_meta(folder)
    if (folder / OLD_TRAINER).exists():
        raise CheckpointError(
            f"checkpoint: {folder / OLD_TRAINER} is an older attnkit's training state, stored as a pickle, "
            f"which attnkit no longer loads (a pickle can run code); its weights still work with evaluate and "
            f"predict, but training cannot resume from it: start a new run (--overwrite or another --out)")
    if STATE_JSON not in meta.get("files", {}) and not (folder / STATE_JSON).exists():  # saved without it
        raise CheckpointError(f"checkpoint: {folder} has no {STATE_JSON}; it cannot be resumed")
    path = verified(folder, STATE_JSON, meta)
    tensors = _read_safetensors(verified(folder, STATE_TENSORS, meta))
    try:
        from .state import decode

        return decode(read_json(path), tensors)
    except (ValueError, UnicodeDecodeError, TypeError, KeyError) as e:
        raise CheckpointError(f"checkpoint: {path} is not a valid trainer state ({_one_line(e)})") from None
