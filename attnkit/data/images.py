"""Image datasets as (image (C, H, W) float tensor, label) examples.

- ``digits``: scikit-learn's bundled 8x8 digits (1,797 images, no download). Fixed stratified split
  (seed 0): 20% test (360), then 10% of the rest dev (144), train 1,293.
- ``mnist``: the IDX files (``train-images-idx3-ubyte.gz`` ...) from a local folder, default
  ``<data root>/mnist``; or downloaded from the canonical mirror into the cache. Either way the
  decompressed bytes are checked against the published MD5s. Train's last 5,000 images are dev.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .download import cache_dir, data_root, fetch, missing_data

__all__ = ["ImageExamples", "load_digits", "load_mnist", "read_idx", "MNIST_FILES", "MNIST_URL"]

MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"  # the mirror torchvision uses
# file -> MD5 of its decompressed bytes (the widely published LeCun checksums)
MNIST_FILES = {
    "train-images-idx3-ubyte.gz": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte.gz": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte.gz": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte.gz": "27ae3e4e09519cfbb04c329615203637",
}
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


class ImageExamples(Sequence):
    """A sequence of (image (C, H, W) float32, label int) backed by two tensors."""

    def __init__(self, images: Tensor, labels: Tensor, classes: list[str]):
        if len(images) != len(labels):
            raise ValueError(f"ImageExamples: {len(images)} images but {len(labels)} labels")
        self.images, self.labels, self.classes = images, labels, classes

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], int(self.labels[i])


def load_digits(seed: int = 0) -> dict[str, ImageExamples]:
    """scikit-learn's 8x8 digits, values scaled to [0, 1]: {"train", "dev", "test"}."""
    from sklearn.datasets import load_digits as sk_digits
    from sklearn.model_selection import train_test_split

    d = sk_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0  # (N, 1, 8, 8)
    y = torch.tensor(d.target, dtype=torch.long)
    idx = np.arange(len(y))
    rest, test = train_test_split(idx, test_size=0.2, random_state=seed, stratify=d.target)
    train, dev = train_test_split(rest, test_size=0.1, random_state=seed, stratify=d.target[rest])
    classes = [str(i) for i in range(10)]
    return {name: ImageExamples(x[ix], y[ix], classes) for name, ix in
            (("train", np.sort(train)), ("dev", np.sort(dev)), ("test", np.sort(test)))}


def read_idx(path: str | os.PathLike, md5: str | None = None) -> np.ndarray:
    """An IDX file (gzipped or not) as a uint8 array; checks the decompressed MD5 when given."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            buf = f.read()
    except (OSError, EOFError) as e:
        raise ValueError(f"read_idx: cannot read {path}: {e}") from None
    if md5 is not None and hashlib.md5(buf).hexdigest() != md5:  # noqa: S324 - a published checksum
        raise ValueError(f"read_idx: {path} has MD5 {hashlib.md5(buf).hexdigest()}, expected {md5}")  # noqa: S324
    if len(buf) < 8:
        raise ValueError(f"read_idx: {path} is too short to be an IDX file ({len(buf)} bytes)")
    magic = struct.unpack(">I", buf[:4])[0]
    if magic >> 8 != 0x08:  # 0x00000801 labels, 0x00000803 images: unsigned bytes
        raise ValueError(f"read_idx: {path} has magic {magic:#010x}, not an unsigned-byte IDX file")
    ndim = magic & 0xFF
    dims = struct.unpack(f">{ndim}I", buf[4:4 + 4 * ndim])
    data = np.frombuffer(buf, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"read_idx: {path} header says {dims} but holds {data.size} values")
    return data.reshape(dims)


def mnist_files(folder: str | os.PathLike | None = None, download: bool = False,
                root: str | os.PathLike | None = None) -> Path:
    """The folder holding the four MNIST files: ``folder``, ``<data root>/mnist``, or the download cache."""
    dest = cache_dir("mnist")
    cand = Path(folder) if folder is not None else data_root(root) / "mnist"
    for where in (cand, dest):
        if all((where / f).exists() for f in MNIST_FILES):
            return where
    if not download:
        raise missing_data("MNIST", f"the files {', '.join(MNIST_FILES)}", cand, "mnist",
                           path_option="--train FOLDER")
    for name in MNIST_FILES:
        fetch(MNIST_URL + name, dest / name, None)  # verified below on the decompressed bytes
    return dest


def load_mnist(folder: str | os.PathLike | None = None, *, download: bool = False, dev_size: int = 5000,
               limit: int | None = None, root: str | os.PathLike | None = None) -> dict[str, ImageExamples]:
    """MNIST normalised with the usual mean / std: {"train", "dev", "test"}. ``folder`` holds the four
    files; without it they are looked for in ``<root>/mnist`` (``root``: the datasets root, see
    ``attnkit.data.download``) and in the download cache."""
    root = mnist_files(folder, download, root)
    arrays = {name: read_idx(root / name, md5) for name, md5 in MNIST_FILES.items()}

    def pack(images, labels):
        x = (torch.from_numpy(images.copy()).float().unsqueeze(1) / 255.0 - MNIST_MEAN) / MNIST_STD
        return x, torch.from_numpy(labels.astype(np.int64))

    x, y = pack(arrays["train-images-idx3-ubyte.gz"], arrays["train-labels-idx1-ubyte.gz"])
    xt, yt = pack(arrays["t10k-images-idx3-ubyte.gz"], arrays["t10k-labels-idx1-ubyte.gz"])
    if limit:
        x, y, xt, yt = x[:limit], y[:limit], xt[:limit], yt[:limit]
        dev_size = min(dev_size, len(y) // 10)
    classes = [str(i) for i in range(10)]
    n = len(y) - dev_size
    return {"train": ImageExamples(x[:n], y[:n], classes), "dev": ImageExamples(x[n:], y[n:], classes),
            "test": ImageExamples(xt, yt, classes)}
