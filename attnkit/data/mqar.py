"""Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology"), generated with a seed.

A sequence opens with ``num_pairs`` key-value pairs ``k1 v1 k2 v2 ...`` (distinct keys); every one of
those keys is then asked once, in a random order, at random places of the rest of the sequence, which
is filled with a blank token. The answer at a query's position is the value that followed the same key
in the pairs; no other position is scored. Zoology's model is causal and reads the value from the
token after the query; these encoders see both sides, so the query is not followed by its value and
its own position carries the answer (``IGNORE`` = -100 everywhere else).

Token ids: 0 padding (never written), 1 the blank, then ``num_keys`` key ids, then the value ids (the
rest of ``vocab_size``, at least two). Answers are value indices 0 .. num_values - 1, the classes a model
predicts. Values are drawn with replacement (two keys may share one), keys without.

Files: ``mqar_{train,val,test}.npz`` with ``tokens`` (N, seq_len) int16 and ``targets`` (N, seq_len)
int16 (-100 where nothing is asked), read with ``allow_pickle=False``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..nn.limits import SEED, check_fields, check_memory, ints
from .npzfile import read_npz, write_splits

__all__ = ["MQARConfig", "generate_mqar", "write_mqar", "read_mqar", "MQAR_FILES", "BLANK", "IGNORE"]

MQAR_FILES = {"train": "mqar_train.npz", "val": "mqar_val.npz", "test": "mqar_test.npz"}
BLANK, FIRST_KEY, IGNORE = 1, 2, -100
_MAX_VOCAB = 32_767  # ids are stored as int16
COUNT = ints(1, 10**7)  # sequences per split
_CHUNK = 1024  # sequences drawn at once (bounds the memory of the draws)


@dataclass(frozen=True)
class MQARConfig:
    """Generator settings; the defaults are the suite's "mqar" task."""

    seq_len: int = field(default=128, metadata={"help": "tokens per sequence: pairs, then queries among blanks",
                                                "range": ints(3, 65_536)})
    num_pairs: int = field(default=16, metadata={
        "help": "key-value pairs at the start of each sequence; every key is asked once later on",
        "range": ints(1, 21_845)})
    vocab_size: int = field(default=130, metadata={
        "help": "token ids in all: padding, blank, keys (half of the rest, rounded down) and values",
        "range": ints(6, _MAX_VOCAB)})
    n_train: int = field(default=20_000, metadata={"help": "training sequences", "range": COUNT})
    n_val: int = field(default=500, metadata={"help": "validation sequences", "range": COUNT})
    n_test: int = field(default=1_000, metadata={"help": "test sequences", "range": COUNT})
    seed: int = field(default=0, metadata={"help": "seed of the generator: the same seed writes the same files",
                                           "range": SEED})

    def __post_init__(self):
        check_fields(self, "mqar")
        if 3 * self.num_pairs > self.seq_len:
            raise ValueError(f"mqar: {self.num_pairs} pairs and their {self.num_pairs} queries take "
                             f"{3 * self.num_pairs} tokens, more than `seq_len`={self.seq_len}; lower `num_pairs` "
                             f"to at most {self.seq_len // 3} or raise `seq_len`")
        if self.num_keys < self.num_pairs:
            raise ValueError(f"mqar: `vocab_size`={self.vocab_size} holds {self.num_keys} keys, too few for "
                             f"{self.num_pairs} distinct keys (`num_pairs`); `vocab_size` must be at least "
                             f"{2 + 2 * self.num_pairs}")

    @property
    def total(self) -> int:
        return self.n_train + self.n_val + self.n_test

    @property
    def num_keys(self) -> int:
        return (self.vocab_size - FIRST_KEY) // 2

    @property
    def num_values(self) -> int:
        return self.vocab_size - FIRST_KEY - self.num_keys

    @property
    def first_value(self) -> int:
        return FIRST_KEY + self.num_keys


def _split(rng: np.random.Generator, n: int, cfg: MQARConfig) -> tuple[np.ndarray, np.ndarray]:
    """n sequences: tokens (n, L) and targets (n, L) int16."""
    d, length = cfg.num_pairs, cfg.seq_len
    keys = np.argsort(rng.random((n, cfg.num_keys)), axis=1)[:, :d]  # (n, D) distinct key indices
    values = rng.integers(0, cfg.num_values, (n, d))  # (n, D) value indices
    tokens = np.full((n, length), BLANK, np.int64)
    tokens[:, 0:2 * d:2] = FIRST_KEY + keys
    tokens[:, 1:2 * d:2] = cfg.first_value + values
    targets = np.full((n, length), IGNORE, np.int64)
    rest = length - 2 * d  # positions where queries may sit
    places = 2 * d + np.sort(np.argsort(rng.random((n, rest)), axis=1)[:, :d], axis=1)  # (n, D) query positions
    order = np.argsort(rng.random((n, d)), axis=1)  # (n, D): which pair each query asks
    rows = np.arange(n)[:, None]
    tokens[rows, places] = FIRST_KEY + keys[rows, order]
    targets[rows, places] = values[rows, order]
    return tokens.astype(np.int16), targets.astype(np.int16)


def generate_mqar(cfg: MQARConfig) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"train", "val", "test"}: (tokens (N, seq_len), targets (N, seq_len)) int16, seeded."""
    check_memory(cfg.total * cfg.seq_len * 4 + _CHUNK * (cfg.seq_len + cfg.num_keys) * 32,
                 f"mqar: {cfg.total:,} sequences of {cfg.seq_len:,} tokens")
    rng = np.random.default_rng(cfg.seed)
    out = {}
    for split, n in (("train", cfg.n_train), ("val", cfg.n_val), ("test", cfg.n_test)):
        parts = [_split(rng, min(_CHUNK, n - i), cfg) for i in range(0, n, _CHUNK)]
        out[split] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    return out


def write_mqar(splits: dict[str, tuple[np.ndarray, np.ndarray]], out_dir: str | os.PathLike) -> list[Path]:
    """Write ``mqar_{train,val,test}.npz`` into ``out_dir`` (each atomically); returns their paths."""
    return write_splits(splits, out_dir, MQAR_FILES, ("tokens", "targets"))


def read_mqar(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(tokens (N, L) int16, targets (N, L) int16) from a ``write_mqar`` file (no pickle); checks them."""
    tokens, targets = read_npz(path, ("tokens", "targets"), what="mqar",
                               missing="create it with `attnkit lra generate mqar`")
    if tokens.dtype != np.int16 or tokens.ndim != 2 or targets.shape != tokens.shape or targets.dtype != np.int16:
        raise ValueError(f"mqar: {path} holds tokens {tokens.dtype}{tokens.shape} and targets "
                         f"{targets.dtype}{targets.shape}; expected int16 (N, L) twice")
    if tokens.size and tokens.min() < BLANK:
        raise ValueError(f"mqar: {path} has token ids below {BLANK} (0 is padding and never written)")
    asked = targets != IGNORE
    if asked.any() and targets[asked].min() < 0:
        raise ValueError(f"mqar: {path} has negative targets other than {IGNORE}")
    return tokens, targets
