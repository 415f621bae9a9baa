"""What a ``.safetensors`` file holds, read without loading a tensor: its names, dtypes and shapes.

The format is an 8-byte little-endian length N, N bytes of JSON (``{name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {...}}``), then the tensors' bytes. ``read_header``
checks every entry against the file's size (each tensor's bytes lie inside the file, and its shape
needs exactly those bytes), so a shape read here never claims more memory than the file holds: a
model whose every size agrees with these shapes allocates no more than the file's size for them.
Any problem is one ``ValueError`` line naming the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .jsonfile import read_json_bytes, regular_file

__all__ = ["TensorInfo", "read_header", "FLOAT_DTYPES", "HEADER_LIMIT"]

# safetensors' dtype names -> bytes per element
ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
            "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
FLOAT_DTYPES = frozenset({"F8_E5M2", "F8_E4M3", "F16", "BF16", "F32", "F64"})
HEADER_LIMIT = 100 << 20  # bytes, the limit the safetensors library itself sets
FILE_LIMIT = 1 << 50  # bytes: any file on a disk


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a safetensors file: its dtype name ("F32", "BF16", ...) and shape."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.dtype]


def _counts(xs, n: int | None = None) -> bool:
    """``xs`` is a list (of ``n`` items) of integers in [0, FILE_LIMIT]."""
    return (isinstance(xs, list) and (n is None or len(xs) == n)
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= FILE_LIMIT for x in xs))


def _entry(name: str, e, data_bytes: int, path: Path) -> tuple[TensorInfo, tuple[int, int]]:
    def bad(what: str):
        return ValueError(f"{path}: not a valid safetensors file: tensor {name[:80]!r} {what}")

    if not isinstance(e, dict) or not isinstance(e.get("dtype"), str) or e["dtype"] not in ITEMSIZE:
        raise bad(f"has no known dtype (got {e.get('dtype') if isinstance(e, dict) else e!r:.40})")
    shape, offsets = e.get("shape"), e.get("data_offsets")
    if not _counts(shape) or len(shape) > 8:
        raise bad(f"has an invalid shape {shape!r:.80}")
    if not _counts(offsets, 2) or not offsets[0] <= offsets[1] <= data_bytes:
        raise bad(f"has data_offsets {offsets!r:.80} outside the file's {data_bytes} bytes of data")
    info = TensorInfo(e["dtype"], tuple(shape))
    if info.nbytes != offsets[1] - offsets[0]:
        raise bad(f"of shape {info.shape} and dtype {info.dtype} needs {info.nbytes} bytes, its offsets give "
                  f"{offsets[1] - offsets[0]}")
    return info, (offsets[0], offsets[1])


def read_header(path: str | Path) -> dict[str, TensorInfo]:
    """name -> ``TensorInfo`` of every tensor in the file, checked as the module doc says."""
    path = Path(path)
    size = regular_file(path, FILE_LIMIT)
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 2 <= n <= min(HEADER_LIMIT, size - 8):
                raise ValueError(f"{path}: not a valid safetensors file (header length {n}, file size {size})")
            raw = f.read(n)
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror})") from None
    header = read_json_bytes(raw, path, "safetensors header")
    if not isinstance(header, dict):
        raise ValueError(f"{path}: not a valid safetensors file (its header is not a JSON object)")
    data_bytes = size - 8 - n
    out, spans = {}, []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        out[name], span = _entry(name, e, data_bytes, path)
        spans.append(span)
    spans.sort()
    for (_, end), (begin, _) in zip(spans, spans[1:]):
        if begin < end:
            raise ValueError(f"{path}: not a valid safetensors file (two tensors share bytes)")
    return out
