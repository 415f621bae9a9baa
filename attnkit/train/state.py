"""Training state without pickle: where a run is, its random generators, and a safe encoding.

A checkpoint's trainer state (optimiser and scheduler state dicts, RNG states, ``RunState``) is a
nest of dicts, lists, tuples, numbers, strings and tensors. ``encode`` splits it into a JSON
document and a flat dict of tensors (stored with safetensors); ``decode`` puts it back together.
Neither side can run code: JSON holds plain values, safetensors holds raw tensor bytes.

JSON tags for what JSON cannot say: ``{"__tensor__": key}`` (a tensor in the safetensors file),
``{"__tuple__": [...]}`` and ``{"__dict__": [[key, value], ...]}`` (a dict whose keys are not all
strings, e.g. an optimiser's per-parameter state keyed by integers).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

TAGS = ("__tensor__", "__tuple__", "__dict__")


@dataclass
class RunState:
    """Where a run is; saved in every checkpoint, restored by ``--resume``."""

    step: int = 0  # optimiser steps taken
    epoch: int = 0  # the epoch the next batch comes from
    batch: int = 0  # index of the next batch within that epoch
    best: float | None = None  # best value so far of the dev metric the task selects by (accuracy by default)
    best_step: int | None = None  # the step it was measured at (its checkpoint is best.json's)
    best_metric: str = "accuracy"  # which dev metric ``best`` is
    seconds: float = 0.0  # training time over every invocation of the run
    dev: dict = field(default_factory=dict)  # the latest dev metrics
    window_loss: float = 0.0  # sum of training loss x items since the last logged step
    window_items: int = 0  # scored items since the last logged step

    def advance(self, batches_in_epoch: int) -> None:
        """One optimiser step done: move to the next batch (or the next epoch's first)."""
        self.step += 1
        self.batch += 1
        if self.batch >= batches_in_epoch:
            self.epoch, self.batch = self.epoch + 1, 0

    @property
    def at_epoch_end(self) -> bool:
        return self.batch == 0 and self.step > 0


# -- encoding ------------------------------------------------------------------------------------
def encode(obj: Any) -> tuple[Any, dict[str, Tensor]]:
    """``obj`` -> (a JSON-able document, tensors by key). Raises TypeError on anything else."""
    tensors: dict[str, Tensor] = {}

    def enc(x: Any, path: str) -> Any:
        if isinstance(x, Tensor):
            if path in tensors:
                raise TypeError(f"trainer state: two tensors at {path}")
            tensors[path] = x.detach().cpu().clone().contiguous()  # clone: no storage shared between keys
            return {"__tensor__": path}
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, tuple):
            return {"__tuple__": [enc(v, f"{path}/{i}") for i, v in enumerate(x)]}
        if isinstance(x, list):
            return [enc(v, f"{path}/{i}") for i, v in enumerate(x)]
        if isinstance(x, dict):
            if all(isinstance(k, str) for k in x) and not (len(x) == 1 and next(iter(x)) in TAGS):
                return {k: enc(v, f"{path}/{k}") for k, v in x.items()}
            return {"__dict__": [[enc(k, f"{path}/key{i}"), enc(v, f"{path}/{k}")]
                                 for i, (k, v) in enumerate(x.items())]}
        raise TypeError(f"trainer state: cannot store {type(x).__name__} at {path or '/'}")

    return enc(obj, ""), tensors


def decode(doc: Any, tensors: dict[str, Tensor]) -> Any:
    """The inverse of ``encode``. Raises ValueError on a document ``encode`` cannot have written."""
    if isinstance(doc, list):
        return [decode(v, tensors) for v in doc]
    if not isinstance(doc, dict):
        return doc
    if len(doc) == 1 and next(iter(doc)) in TAGS:
        (tag, value), = doc.items()
        if tag == "__tensor__":
            if value not in tensors:
                raise ValueError(f"refers to tensor {value!r}, which is not in the tensor file")
            return tensors[value]
        if tag == "__tuple__":
            return tuple(decode(v, tensors) for v in value)
        return {decode(k, tensors): decode(v, tensors) for k, v in value}
    return {k: decode(v, tensors) for k, v in doc.items()}


def to_bytes(obj: Any) -> bytes:
    """``obj`` (as for ``encode``) as one byte string: JSON, tensors as typed lists. For small states
    sent between processes (every rank's RNG state goes to rank 0, which saves them)."""
    doc, tensors = encode(obj)
    listed = {k: [str(t.dtype).removeprefix("torch."), t.tolist()] for k, t in tensors.items()}
    return json.dumps({"doc": doc, "tensors": listed}).encode()


def from_bytes(data: bytes) -> Any:
    d = json.loads(data)
    return decode(d["doc"], {k: torch.tensor(v, dtype=getattr(torch, dtype)) for k, (dtype, v) in d["tensors"].items()})


# -- random generators ---------------------------------------------------------------------------
def seed_everything(seed: int) -> None:
    """Python, numpy and torch (every device) generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# An accelerator's own generator: device type -> (get(device), set(state, device)).
_ACCELERATOR_RNG = {
    "cuda": (lambda d: torch.cuda.get_rng_state(d), lambda s, d: torch.cuda.set_rng_state(s, d)),
    "mps": (lambda d: torch.mps.get_rng_state(), lambda s, d: torch.mps.set_rng_state(s)),
}


def rng_state(device: torch.device) -> dict:
    """Every generator a training step may draw from. An accelerator's own generator is included
    only when the model runs there (``cuda`` or ``mps``); on the CPU the CPU generator is all."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(),
             "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached": float(cached)}}
    if device.type in _ACCELERATOR_RNG:
        state[device.type] = _ACCELERATOR_RNG[device.type][0](device)
    return state


def set_rng_state(state: dict, device: torch.device) -> list[str]:
    """Restore ``rng_state``'s output; returns notes on what could not be restored on ``device``."""
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss"]))
    npst = state["numpy"]
    np.random.set_state((npst["kind"], npst["keys"].numpy().astype(np.uint32), npst["pos"], npst["has_gauss"],
                         npst["cached"]))
    notes = [f"the checkpoint's {kind} generator state is not used on {device.type}: random draws (dropout) "
             f"differ from an uninterrupted run" for kind in _ACCELERATOR_RNG if kind in state and kind != device.type]
    if device.type in _ACCELERATOR_RNG:
        if device.type in state:
            _ACCELERATOR_RNG[device.type][1](state[device.type], device)
        else:
            notes.append(f"the checkpoint has no {device.type} generator state (it was trained on another "
                         f"device): random draws (dropout) differ from an uninterrupted run")
    return notes
