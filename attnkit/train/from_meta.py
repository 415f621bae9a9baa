"""A run's model, built from its ``meta.json`` only after every size there agrees with the weights file.

``meta.json`` is not covered by the checksums it lists, so its model part is verified against the
weights instead (``model_from_meta``):

1. ``model.safetensors`` is checked against its sha256, and its header read (names, dtypes, shapes:
   ``attnkit.data.safetensors_header``, no tensor loaded; every shape there is backed by the file's bytes);
2. every integer of ``meta["model"]`` is bounded before anything is built: a count of layers by the
   number of tensors in the file, any other size by the file's largest dimension (or ``SIZE_LIMIT``);
3. the model is built on the ``meta`` device (shapes only, no memory) and its parameters and persistent
   buffers must be exactly the file's tensors, name for name and shape for shape; its other buffers
   (position tables) may take at most ``BUFFER_LIMIT`` bytes;
4. only then is it built for real and given the weights.

Every problem is one ``CheckpointError`` line naming ``meta.json`` or the weights file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path

import torch
from torch import nn

from ..data.safetensors_header import TensorInfo, read_header
from .checkpoint import META, WEIGHTS, CheckpointError, _read_safetensors, fill, verified

__all__ = ["model_from_meta", "listed", "config_from_meta", "SIZE_LIMIT", "BUFFER_LIMIT"]

SIZE_LIMIT = 1 << 20  # a size in meta.json beyond every dimension of the weights and this is refused
BUFFER_LIMIT = 1 << 26  # bytes of tensors a model makes itself (sinusoidal tables, computed in float64 first)


def _ints(obj, keys: tuple = ()) -> Iterator[tuple[tuple, int]]:
    """(key path, value) of every integer (not bool) in nested dicts and lists."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _ints(v, (*keys, str(k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _ints(v, (*keys, str(i)))
    elif isinstance(obj, int) and not isinstance(obj, bool):
        yield keys, obj


def check_sizes(model: dict, header: dict[str, TensorInfo], source: Path, weights: Path) -> None:
    """Step 2 of the module doc: the integers of ``meta["model"]`` against the weights' header."""
    largest = max((max(t.shape, default=0) for t in header.values()), default=0)
    bound = max(SIZE_LIMIT, largest)
    for keys, v in _ints(model, ("model",)):
        name = ".".join(keys)
        if "layers" in keys[-1] and v > len(header):
            raise CheckpointError(f"checkpoint: {source}: `{name}` is {v}, but {weights} holds only "
                                  f"{len(header)} tensors")
        if abs(v) > bound:
            raise CheckpointError(f"checkpoint: {source}: `{name}` is {v}, larger than any size of the weights "
                                  f"in {weights} ({largest}) and than {SIZE_LIMIT}")


def _skeleton(build: Callable[[], nn.Module], source: Path) -> nn.Module:
    try:
        with torch.device("meta"):
            return build()
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RuntimeError, OverflowError) as e:
        msg = " ".join(str(e).split())[:300]
        raise CheckpointError(f"checkpoint: {source} has an invalid `model` ({type(e).__name__}: {msg})") from None


def check_shapes(skeleton: nn.Module, header: dict[str, TensorInfo], source: Path, weights: Path,
                 missing_ok: tuple[str, ...] = ()) -> None:
    """Step 3: the skeleton's state dict against the file's tensors; its own buffers within ``BUFFER_LIMIT``."""
    want = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    missing = sorted(k for k in set(want) - set(header) if not (missing_ok and k.startswith(missing_ok)))
    unexpected = sorted(set(header) - set(want))
    wrong = [f"{k} {want[k]} in {META}, {header[k].shape} in {WEIGHTS}" for k in sorted(set(want) & set(header))
             if want[k] != header[k].shape]
    if missing or unexpected or wrong:
        parts = [f"missing {missing[:5]}" if missing else "", f"unexpected {unexpected[:5]}" if unexpected else "",
                 "; ".join(wrong[:5])]
        raise CheckpointError(f"checkpoint: {source}'s model does not fit {weights}: "
                              + "; ".join(p for p in parts if p))
    kinds = {k: v.is_floating_point() for k, v in skeleton.state_dict().items()}
    cast = [f"{k} ({header[k].dtype})" for k in sorted(set(kinds) & set(header)) if kinds[k] != header[k].is_float]
    if cast:  # int8 (or bool) tensors where the model has floats would be cast silently by load_state_dict
        raise CheckpointError(f"checkpoint: {weights} holds tensors of another kind than the model's (floating "
                              f"point or not): {', '.join(cast[:5])}")
    stored = {id(t) for t in skeleton.state_dict(keep_vars=True).values()}
    own = sum(math.prod(b.shape) * b.element_size() for b in skeleton.buffers() if id(b) not in stored)
    if own > BUFFER_LIMIT:
        raise CheckpointError(f"checkpoint: {source}'s model makes {own} bytes of tables of its own (positions), "
                              f"more than the {BUFFER_LIMIT} attnkit allows")


def model_from_meta(folder: str | Path, meta: dict, build: Callable[[], nn.Module], *,
                    missing_ok: tuple[str, ...] = ()) -> nn.Module:
    """``build()`` (the model ``meta`` describes) with the folder's weights, after the checks of the module doc.

    ``missing_ok``: name prefixes of parameters the weights may lack (they keep their initial values)."""
    folder = Path(folder)
    source = folder / META
    weights = verified(folder, WEIGHTS, meta)
    try:
        header = read_header(weights)
    except ValueError as e:
        raise CheckpointError(f"checkpoint: {e}") from None
    if not isinstance(meta.get("model"), (dict, type(None))):
        raise CheckpointError(f"checkpoint: {source}: `model` must be a JSON object, got "
                              f"{type(meta.get('model')).__name__}")
    check_sizes(meta.get("model") or {}, header, source, weights)
    check_shapes(_skeleton(build, source), header, source, weights, missing_ok)
    model = build()
    fill(folder, model, _read_safetensors(weights), missing_ok=missing_ok)
    return model


def listed(folder: str | Path, meta: dict, key: str, size: int | None) -> list[str]:
    """``meta[key]``, a list of strings (a vocabulary, the labels) checked to hold exactly ``size`` entries (the
    rows of the model's table or outputs it indexes; None: any number): an id past the model's table is never made."""
    v = meta.get(key)
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise CheckpointError(f"checkpoint: {Path(folder) / META}: `{key}` must be a list of strings, got "
                              f"{type(v).__name__}")
    if size is not None and len(v) != size:
        raise CheckpointError(f"checkpoint: {Path(folder) / META}: `{key}` has {len(v)} entries, but the model's "
                              f"weights have {size}")
    return v


def config_from_meta(folder: str | Path, meta: dict, key: str, cls: type):
    """``cls(**meta[key])``, a frozen config whose fields are checked (and bounded) on creation; any problem (not
    an object, an unknown setting, a value out of its range) is one CheckpointError naming meta.json and
    ``key.field``."""
    source = Path(folder) / META
    d = meta.get(key)
    if not isinstance(d, dict):
        raise CheckpointError(f"checkpoint: {source}: `{key}` must be a JSON object, got {type(d).__name__}")
    known = [f.name for f in fields(cls)]
    unknown = sorted(k for k in d if k not in known)
    if unknown:
        raise CheckpointError(f"checkpoint: {source}: `{key}.{unknown[0]:.80}` is not a setting of {cls.__name__} "
                              f"(known: {', '.join(known)})")
    try:
        return cls(**d)
    except (ValueError, TypeError) as e:  # "FeatureConfig: `hop_ms` must be ..." -> "`features.hop_ms` must be ..."
        msg = re.sub(rf"^{cls.__name__}: `(\w+)`", lambda m: f"`{key}.{m.group(1)}`", " ".join(str(e).split()))
        raise CheckpointError(f"checkpoint: {source}: {msg[:300]}") from None
