"""``PositionsConfig``, the positions experiment's settings, and ``QUICK``, its ``--quick`` sizes, in a module
without torch: ``attnkit experiment positions --help`` is built from their fields. ``attnkit.experiments.positions``
runs the experiment."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...nn.limits import ints
from .fields import check, lr_field, seeds_field, trained_field

__all__ = ["PositionsConfig", "ENCODINGS", "QUICK", "FULL"]

ENCODINGS = ("sinusoidal", "learned", "relative", "rope", "alibi", "none")


@dataclass(frozen=True)
class PositionsConfig:
    """The positions experiment: encodings, training and test lengths, model size, the budget."""

    encodings: tuple[str, ...] = trained_field(ENCODINGS, "the positional encodings to train")
    train_length: int = field(default=64, metadata={"help": "longest training sequence", "range": ints(2, 4096)})
    min_train_length: int = field(default=8, metadata={
        "help": "shortest training sequence (each step draws its length uniformly in between)", "range": ints(2, 4096)})
    test_lengths: tuple[int, ...] = field(default=(64, 128, 256, 512), metadata={
        "help": "lengths the trained models are scored at"})
    seeds: int = seeds_field("data and initialisation")
    vocab: int = field(default=16, metadata={"help": "symbols a token takes (chance = 1 / vocab)",
                                             "range": ints(2, 4096)})
    d_model: int = field(default=64, metadata={"help": "model width", "range": ints(4, 1024)})
    layers: int = field(default=2, metadata={"help": "encoder layers", "range": ints(1, 12)})
    max_relative_distance: int = field(default=16, metadata={
        "help": "relative: distances beyond this share one embedding", "range": ints(1, 4096)})
    steps: int = field(default=1000, metadata={"help": "training steps per encoding", "range": ints(1, 10**6)})
    batch_size: int = field(default=32, metadata={"help": "sequences per step", "range": ints(1, 4096)})
    lr: float = lr_field(3e-3)
    test_sequences: int = field(default=200, metadata={"help": "test sequences per length (and as many dev)",
                                                       "range": ints(1, 10**6)})

    def __post_init__(self):
        check(self, whole={"test_lengths": (2, 65536)}, choices={"encodings": ENCODINGS})
        if self.min_train_length > self.train_length:
            raise ValueError(f"PositionsConfig: `min_train_length` {self.min_train_length} > `train_length` "
                             f"{self.train_length}")
        if self.d_model % 8:
            raise ValueError(f"PositionsConfig: `d_model` must be a multiple of 8 (4 heads of an even size), "
                             f"got {self.d_model}")


# The run that answers the question, and its time (BENCHMARKS.md, "The lecture's claims").
FULL = "attnkit experiment positions --jobs 2 --threads 1 (8.9 min on a 2-core Zen 3 AVX2 host)"
QUICK = PositionsConfig(encodings=ENCODINGS, train_length=16, min_train_length=4, test_lengths=(16, 32), seeds=2,
                        d_model=16, layers=1, steps=6, batch_size=8, test_sequences=16)
