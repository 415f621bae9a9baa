"""LRA-lite's data: each task as token sequences (0 = padding) and labels, generated or loaded once.

- listops: ``attnkit.data.listops`` (LRA's recipe), lengths from seq_len / 4 to seq_len, 10 classes;
- text: IMDb bytes (``attnkit.data.imdb``), 2 classes; only where the reviews exist (or ``download``);
- image: MNIST pixels row by row (``attnkit.data.images``; LRA's sequential CIFAR-10 is not
  available here), optionally cropped around the centre and average-pooled to side^2 pixels (784: as
  they are; 100: the centre 20 x 20 in 2 x 2 pools), 10 classes;
- pathfinder: ``attnkit.data.pathfinder``, side^2 pixels, 2 classes;
- mqar: ``attnkit.data.mqar`` (multi-query associative recall): examples are (tokens (L,), targets (L,))
  with the value index at each query and -100 elsewhere; the classes are the values.

Pixels are tokens (value + 1, vocabulary 257), as LRA feeds its 8-bit images. Generated data goes to
``<data_dir>/<family>-<sizes>-<hash of the generator options>-seed<S>/`` and is reused by every variant
and by later runs.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..data import imdb, listops, mqar, pathfinder
from ..data.images import MNIST_FILES, mnist_files, read_idx
from .settings import TaskSettings

__all__ = ["TaskData", "prepare_task", "text_available", "pathfinder_config", "listops_config", "mqar_config"]


@dataclass
class TaskData:
    """Examples are (tokens (L,) int64, label), or for mqar (tokens (L,), targets (L,)) int64."""

    train: list[tuple[Tensor, int]]
    val: list[tuple[Tensor, int]]
    test: list[tuple[Tensor, int]]
    vocab_size: int
    num_classes: int
    source: str


def _tokens(rows) -> list[tuple[Tensor, int]]:
    return [(torch.as_tensor(ids, dtype=torch.long), int(y)) for ids, y in rows]


def _pixels(images: np.ndarray, labels: np.ndarray) -> list[tuple[Tensor, int]]:
    """(N, H, W) uint8 -> [(H * W tokens = value + 1, label)], row by row."""
    flat = torch.from_numpy(images.reshape(len(images), -1).astype(np.int64) + 1)  # (N, H*W)
    return [(flat[i], int(labels[i])) for i in range(len(labels))]


def listops_config(s: TaskSettings, seed: int) -> listops.ListOpsConfig:
    """LRA's recipe up to ``s.seq_len`` tokens, from ``s.seq_len // 4`` unless ``s.generator`` says otherwise."""
    options = {"min_length": s.seq_len // 4, **s.generator}
    return listops.ListOpsConfig(max_length=s.seq_len, n_train=s.n_train, n_val=s.n_val, n_test=s.n_test,
                                 seed=seed, **options)


def _listops(s: TaskSettings, folder: Path, seed: int) -> TaskData:
    if not all((folder / f).exists() for f in listops.SPLIT_FILES.values()):
        cfg = listops_config(s, seed)
        print(f"generating ListOps into {folder} ({cfg.total:,} expressions, {cfg.min_length} < length < "
              f"{cfg.max_length}, depth <= {cfg.max_depth})", flush=True)
        listops.write_listops(listops.generate_listops(cfg), folder)
    splits = {k: _tokens(listops.read_listops(folder / f)) for k, f in listops.SPLIT_FILES.items()}
    return TaskData(splits["train"], splits["val"], splits["test"], len(listops.VOCAB), 10, str(folder))


def mqar_config(s: TaskSettings, seed: int) -> mqar.MQARConfig:
    return mqar.MQARConfig(seq_len=s.seq_len, n_train=s.n_train, n_val=s.n_val, n_test=s.n_test, seed=seed,
                           **s.generator)


def _mqar(s: TaskSettings, folder: Path, seed: int) -> TaskData:
    cfg = mqar_config(s, seed)
    if not all((folder / f).exists() for f in mqar.MQAR_FILES.values()):
        print(f"generating MQAR into {folder} ({cfg.total:,} sequences of {cfg.seq_len} tokens, {cfg.num_pairs} "
              f"pairs, {cfg.num_keys} keys, {cfg.num_values} values)", flush=True)
        mqar.write_mqar(mqar.generate_mqar(cfg), folder)
    splits = {}
    for k, f in mqar.MQAR_FILES.items():
        tokens, targets = (torch.from_numpy(a.astype(np.int64)) for a in mqar.read_mqar(folder / f))
        splits[k] = list(zip(tokens, targets))
    return TaskData(splits["train"], splits["val"], splits["test"], cfg.vocab_size, cfg.num_values, str(folder))


def pathfinder_config(side: int, s: TaskSettings, seed: int) -> pathfinder.PathfinderConfig:
    """The default 32x32 generator, or a sparser one for smaller images; ``s.generator`` overrides either."""
    small = {} if side >= 32 else {"contour_length": 3, "distractor_length": 2, "num_distractors": 1,
                                   "paddle_length": 2.5, "paddle_gap": 1.5, "min_distance": 2.0, "dot_radius": 1.0}
    return pathfinder.PathfinderConfig(size=side, n_train=s.n_train, n_val=s.n_val, n_test=s.n_test, seed=seed,
                                       **{**small, **s.generator})


def _pathfinder(s: TaskSettings, folder: Path, seed: int) -> TaskData:
    side = math.isqrt(s.seq_len)
    if side * side != s.seq_len:
        raise ValueError(f"lra pathfinder: seq_len={s.seq_len} must be a square (side^2 pixels)")
    if not all((folder / f).exists() for f in pathfinder.PATHFINDER_FILES.values()):
        print(f"generating Pathfinder into {folder} ({s.n_train + s.n_val + s.n_test:,} images of {side}x{side})",
              flush=True)
        pathfinder.write_pathfinder(pathfinder.generate_pathfinder(pathfinder_config(side, s, seed)), folder)
    splits = {k: _pixels(*pathfinder.read_pathfinder(folder / f)) for k, f in pathfinder.PATHFINDER_FILES.items()}
    return TaskData(splits["train"], splits["val"], splits["test"], 257, 2, str(folder))


def _image(s: TaskSettings, mnist_dir: Path | None) -> TaskData:
    side = math.isqrt(s.seq_len)
    pool = 28 // side if side else 0
    if side * side != s.seq_len or not 2 <= side <= 28 or (28 - side * pool) % 2:
        raise ValueError(f"lra image: seq_len={s.seq_len} must be side^2 with 28 - side * (28 // side) even "
                         f"(a centred crop cut into whole pools): 784, 196, 100, 49, ...")
    crop = (28 - side * pool) // 2  # pixels cut from each edge (digits sit in MNIST's centre 20 x 20)
    root = mnist_files(mnist_dir)
    arrays = {name: read_idx(root / name, md5) for name, md5 in MNIST_FILES.items()}
    x, y = arrays["train-images-idx3-ubyte.gz"], arrays["train-labels-idx1-ubyte.gz"]
    xt, yt = arrays["t10k-images-idx3-ubyte.gz"], arrays["t10k-labels-idx1-ubyte.gz"]
    if s.n_train + s.n_val > len(y) or s.n_test > len(yt):
        raise ValueError(f"lra image: MNIST has {len(y):,} training and {len(yt):,} test images; asked for "
                         f"{s.n_train:,} + {s.n_val:,} and {s.n_test:,}")

    def pooled(a: np.ndarray) -> np.ndarray:  # (N, 28, 28) -> (N, side, side) uint8: crop, average of pool x pool
        a = a[:, crop:28 - crop, crop:28 - crop]  # (N, side * pool, side * pool)
        return np.round(a.reshape(len(a), side, pool, side, pool).mean((2, 4))).astype(np.uint8)

    train = _pixels(pooled(x[:s.n_train]), y[:s.n_train])
    val = _pixels(pooled(x[len(y) - s.n_val:]), y[len(y) - s.n_val:])  # the end of train: never trained on
    test = _pixels(pooled(xt[:s.n_test]), yt[:s.n_test])
    return TaskData(train, val, test, 257, 10, f"MNIST {root} (crop {crop}, pool {pool})")


def text_available(folder: str | Path | None = None) -> bool:
    try:
        imdb.imdb_folder(folder)
        return True
    except FileNotFoundError:
        return False


def _text(s: TaskSettings, folder: Path | None, download: bool) -> TaskData:
    data = imdb.load_imdb(folder, max_length=s.seq_len, download=download)
    train, test = data["train"], data["test"]
    if s.n_train + s.n_val > len(train) or s.n_test > len(test):
        raise ValueError(f"lra text: IMDb has {len(train):,} training and {len(test):,} test reviews; asked for "
                         f"{s.n_train:,} + {s.n_val:,} and {s.n_test:,}")
    return TaskData(_tokens(train[:s.n_train]), _tokens(train[len(train) - s.n_val:]), _tokens(test[:s.n_test]),
                    257, 2, "IMDb (aclImdb)")


def _folder(data_dir: Path, s: TaskSettings, seed: int) -> Path:
    """``<family>-L<len>-n<train>-<val>-<test>[-<hash of the generator options>]-seed<S>``: one folder per data.
    Pathfinder's hash covers every option of its generator, defaults included: a changed default is new data."""
    options = s.generator
    side = math.isqrt(s.seq_len)
    if s.task == "pathfinder" and side * side == s.seq_len:
        options = asdict(pathfinder_config(side, s.replace(n_train=1, n_val=1, n_test=1), 0))
        for k in ("n_train", "n_val", "n_test", "seed"):  # in the name already
            del options[k]
    tag = f"-{hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:8]}" if options else ""
    return data_dir / f"{s.task}-L{s.seq_len}-n{s.n_train}-{s.n_val}-{s.n_test}{tag}-seed{seed}"


def prepare_task(s: TaskSettings, data_dir: str | Path, seed: int, *, mnist_dir: str | Path | None = None,
                 imdb_dir: str | Path | None = None, download: bool = False) -> TaskData:
    """Generate (once) or load the data of the task with settings ``s`` (its family: ``s.task``)."""
    folder = _folder(Path(data_dir), s, seed)
    if s.task == "listops":
        return _listops(s, folder, seed)
    if s.task == "pathfinder":
        return _pathfinder(s, folder, seed)
    if s.task == "mqar":
        return _mqar(s, folder, seed)
    if s.task == "image":
        return _image(s, None if mnist_dir is None else Path(mnist_dir))
    if s.task == "text":
        return _text(s, None if imdb_dir is None else Path(imdb_dir), download)
    raise ValueError(f"lra: unknown task family {s.task!r}")
