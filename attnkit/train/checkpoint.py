"""Atomic checkpoints: weights in safetensors, a JSON of config / vocabulary / labels, trainer state.

Layout of a run folder ``out/``::

    out/ckpt-00001200/model.safetensors   the weights (float tensors, contiguous)
    out/ckpt-00001200/meta.json           format version, task, model config, vocab, labels, metrics
    out/ckpt-00001200/trainer.pt          optimiser, scheduler, RNG states, step / epoch (for --resume)
    out/latest.json                       {"path": "ckpt-00001200", ...}: the newest complete checkpoint
    out/best.json                         the checkpoint with the best dev metric

A checkpoint is written into a hidden temporary folder, flushed, then renamed into place; only then
is ``latest.json`` replaced (``os.replace``, atomic). A kill or a full disk mid-save leaves at most
a ``.tmp-*`` folder that is ignored and cleaned next time: the previous checkpoint stays the latest.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import torch
from torch import nn

FORMAT_VERSION = 1
WEIGHTS, META, TRAINER = "model.safetensors", "meta.json", "trainer.pt"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: missing, from another task, or from a newer format."""


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(out_dir: str | os.PathLike, model: nn.Module, meta: dict, *, step: int,
                    trainer_state: dict | None = None, best: bool = False, keep: int = 2) -> Path:
    """Write ``out_dir/ckpt-{step}`` atomically and point ``latest.json`` (and ``best.json``) at it.

    ``meta`` must hold ``task``; it is stored with ``format_version`` and ``step``. Keeps the
    ``keep`` newest checkpoints plus the best one.
    """
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = f"ckpt-{step:08d}"
    tmp = out / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        save_file(tensors, str(tmp / WEIGHTS), metadata={"format_version": str(FORMAT_VERSION)})
        full_meta = {**meta, "format_version": FORMAT_VERSION, "step": step}
        with open(tmp / META, "w", encoding="utf-8") as f:
            json.dump(full_meta, f, indent=1, sort_keys=True)
        if trainer_state is not None:
            torch.save(trainer_state, tmp / TRAINER)
        for p in tmp.iterdir():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
        final = out / name
        if final.exists():  # re-saving the same step (e.g. Ctrl-C right after a save)
            shutil.rmtree(final)
        os.rename(tmp, final)
        _fsync_dir(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _write_json(out / "latest.json", {"path": name, "step": step})
    if best:
        _write_json(out / "best.json", {"path": name, "step": step, "metrics": meta.get("metrics", {})})
    _prune(out, keep)
    return final


def _pointer(out: Path, which: str) -> str | None:
    try:
        return json.loads((out / f"{which}.json").read_text(encoding="utf-8"))["path"]
    except (OSError, ValueError, KeyError):
        return None


def _prune(out: Path, keep: int) -> None:
    ckpts = sorted(p for p in out.glob("ckpt-*") if p.is_dir())
    protected = {_pointer(out, "latest"), _pointer(out, "best")}
    for p in ckpts[:-keep] if keep > 0 else ckpts:
        if p.name not in protected:
            shutil.rmtree(p, ignore_errors=True)
    for p in out.glob(".tmp-ckpt-*"):  # leftovers of a killed save
        shutil.rmtree(p, ignore_errors=True)


def resolve(path: str | os.PathLike, which: str = "latest") -> Path:
    """A checkpoint folder from either the folder itself or a run folder (its latest / best)."""
    p = Path(path)
    if (p / META).exists():
        return p
    if not p.exists():
        raise CheckpointError(f"checkpoint: {p} does not exist")
    name = _pointer(p, which) or _pointer(p, "latest")
    if name and (p / name / META).exists():
        return p / name
    ckpts = sorted(c for c in p.glob("ckpt-*") if (c / META).exists())
    if not ckpts:
        raise CheckpointError(f"checkpoint: no checkpoint in {p} (expected {META} or latest.json)")
    return ckpts[-1]


def load_meta(path: str | os.PathLike, task: str | None = None, which: str = "latest") -> tuple[Path, dict]:
    """Read and check meta.json: the format version must be known and the task must match."""
    folder = resolve(path, which)
    try:
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
    except ValueError as e:
        raise CheckpointError(f"checkpoint: {folder / META} is not valid JSON: {e}") from None
    version = meta.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint: {folder} has format version {version!r}; this attnkit reads "
                              f"versions <= {FORMAT_VERSION}. Upgrade attnkit to load it.")
    if task is not None and meta.get("task") != task:
        raise CheckpointError(f"checkpoint: {folder} was trained for task {meta.get('task')!r}, "
                              f"not {task!r}")
    return folder, meta


def load_weights(folder: str | os.PathLike, model: nn.Module) -> None:
    from safetensors.torch import load_file

    state = load_file(str(Path(folder) / WEIGHTS))
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint: weights in {folder} do not fit the model: {e}") from None
    if missing or unexpected:
        raise CheckpointError(f"checkpoint: weights in {folder} do not fit the model: missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")


def load_trainer_state(folder: str | os.PathLike) -> dict:
    p = Path(folder) / TRAINER
    if not p.exists():
        raise CheckpointError(f"checkpoint: {folder} has no {TRAINER}; it cannot be resumed")
    return torch.load(p, map_location="cpu", weights_only=False)
