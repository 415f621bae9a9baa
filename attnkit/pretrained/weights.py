"""Checkpoint weights files: their tensors, and what a file holds, read before its tensors (the names they map to
are each format's: ``bert_layout.py``, ``marian/layout.py``).

``tensor_shapes(path)`` gives every tensor's dtype and shape without reading the tensors (a
safetensors header; a ``pytorch_model.bin`` memory-mapped), so sizes from ``config.json`` are
checked before anything is allocated. A ``pytorch_model.bin`` is a pickle: before torch reads it,
``check_pickle`` walks its opcodes and refuses any Python name that torch's tensor files do not use
(torch's own ``weights_only`` reader is the second guard), so no pickle code ever runs.
"""

from __future__ import annotations

import pickletools
import re
import warnings
import zipfile
from pathlib import Path

import torch
from torch import Tensor

from ..data.safetensors_header import TensorInfo, read_header

__all__ = ["read_state_dict", "tensor_shapes", "check_pickle", "layer_count"]

# The Python names torch.save writes for a dict of tensors (storages, dtypes and rebuild functions).
_TORCH_NAMES = {("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor"),
                ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor_v3"),
                ("torch._utils", "_rebuild_parameter"), ("torch._utils", "_rebuild_parameter_with_state"),
                ("torch._tensor", "_rebuild_from_type_v2"), ("torch.nn.parameter", "Parameter"),
                ("torch", "Tensor"), ("torch", "Size")}
_STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "SHORT_BINSTRING", "BINSTRING", "STRING"}
_DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
                torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
                torch.bool: "BOOL"}


def _allowed(module: str, name: str) -> bool:
    """A name torch.save writes: ``_TORCH_NAMES``, a storage class or a dtype (looked up in torch's own names, no
    attribute hook runs)."""
    return ((module, name) in _TORCH_NAMES
            or (module == "torch" and (name.endswith("Storage") or isinstance(vars(torch).get(name), torch.dtype))))


def _refused(path: Path, what: str) -> ValueError:
    return ValueError(f"{path}: refused: its pickle refers to {what}, which a file of tensors does not need; "
                      "attnkit runs no pickle code (convert it to model.safetensors)")


def _check_ops(data, path: Path) -> None:
    """Walk one pickle's opcodes (no code runs); a ValueError for a Python name a tensor file does not use."""
    recent: list[str] = []
    for op, arg, _ in pickletools.genops(data):
        if op.name in _STRINGS:
            recent = [*recent[-1:], str(arg)]
        elif op.name in ("GLOBAL", "INST"):
            module, _, name = str(arg).partition(" ")
            if not _allowed(module, name):
                raise _refused(path, f"the Python object {module}.{name}"[:200])
        elif op.name == "STACK_GLOBAL" and (len(recent) < 2 or not _allowed(*recent)):
            raise _refused(path, f"the Python object {'.'.join(recent[-2:]) or 'named on its stack'}"[:200])
        elif op.name in ("EXT1", "EXT2", "EXT4", "OBJ"):
            raise _refused(path, f"Python objects ({op.name})")


def check_pickle(path: Path) -> None:
    """Refuse ``path`` (torch's zip format, or the older plain sequence of pickles) unless every Python name
    its pickles refer to is one torch.save writes for tensors. Reads opcodes only; nothing is unpickled."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                pkls = [n for n in z.namelist() if n.endswith("data.pkl")]
                if len(pkls) != 1:
                    raise ValueError(f"{path}: not a torch checkpoint (a zip without one data.pkl)")
                if z.getinfo(pkls[0]).file_size > 1 << 28:
                    raise ValueError(f"{path}: its data.pkl is larger than a file of tensors needs")
                _check_ops(z.read(pkls[0]), path)
            return
        with open(path, "rb") as f:  # torch's format before 1.6: magic, protocol, system info, the dict, keys
            for _ in range(5):
                _check_ops(f, path)
    except ValueError as e:
        if str(e).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a torch checkpoint ({' '.join(str(e).split())[:200]})") from None
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{path}: cannot read weights: {' '.join(str(e).split())[:200]}") from None


def _torch_load(path: Path) -> dict:
    """A ``pytorch_model.bin`` that passed ``check_pickle``: memory-mapped (zip format), tensors only."""
    with warnings.catch_warnings():  # e.g. a pickle protocol torch does not write; the file is checked above
        warnings.simplefilter("ignore")
        return torch.load(str(path), map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))


def tensor_shapes(path: Path) -> dict[str, TensorInfo]:
    """name -> dtype and shape of every tensor of a weights file, without reading the tensors' bytes."""
    path = Path(path)
    if path.suffix == ".safetensors":
        return read_header(path)
    state = read_state_dict(path)
    return {k: TensorInfo(_DTYPE_NAMES.get(v.dtype, str(v.dtype)), tuple(v.shape)) for k, v in state.items()}


def layer_count(names, prefix: str) -> int:
    """How many layers ``prefix.{i}.`` the tensor names hold (indices counted once each)."""
    pattern = re.compile(re.escape(prefix) + r"\.(\d+)\.")
    return len({m.group(1) for n in names if (m := pattern.match(n))})


def read_state_dict(path: Path) -> dict[str, Tensor]:
    """Tensors of a ``.safetensors`` file or a ``pytorch_model.bin`` (its pickle checked by ``check_pickle``, then
    ``torch.load(weights_only=True)``, memory-mapped)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    if path.suffix != ".safetensors":
        check_pickle(path)  # outside the try below: its one-line refusal is kept as it is
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path), device="cpu")
        else:
            state = _torch_load(path)
    except Exception as e:  # corrupt or truncated files, pickled code (refused), safetensors' own error type
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise ValueError(f"{path}: cannot read weights: {first}") from None
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ValueError(f"{path}: expected a flat dict of tensors")
    for name, t in state.items():  # a NaN / inf weight makes every output NaN, or an empty translation
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{path}: tensor {name[:120]} holds NaN or infinite values; attnkit loads finite "
                             "weights only")
    return state
