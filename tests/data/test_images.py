import gzip
import hashlib
import struct

import numpy as np
import pytest

from attnkit.data.images import load_digits, load_mnist, read_idx


def test_digits_split_is_fixed_and_disjoint():
    d = load_digits()
    assert {k: len(v) for k, v in d.items()} == {"train": 1293, "dev": 144, "test": 360}
    x, y = d["test"][0]
    assert x.shape == (1, 8, 8) and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    assert 0 <= y <= 9


def _idx(path, arr, magic_type=0x08):
    hdr = struct.pack(">I", (magic_type << 8) | arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(hdr + arr.astype(np.uint8).tobytes())
    return hashlib.md5(hdr + arr.astype(np.uint8).tobytes()).hexdigest()


def test_read_idx_and_checks(tmp_path):
    arr = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    md5 = _idx(tmp_path / "x.gz", arr)
    assert (read_idx(tmp_path / "x.gz", md5) == arr).all()
    with pytest.raises(ValueError, match="MD5"):
        read_idx(tmp_path / "x.gz", "0" * 32)
    _idx(tmp_path / "bad.gz", arr, magic_type=0x0D)
    with pytest.raises(ValueError, match="magic"):
        read_idx(tmp_path / "bad.gz")


def test_mnist_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="--download"):
        load_mnist(tmp_path)
