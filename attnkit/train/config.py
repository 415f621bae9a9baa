"""``TrainConfig``: the optimisation settings of a run, a frozen dataclass validated on creation.

Each field says what it does in ``metadata["help"]`` and what it accepts in ``metadata["range"]``
(``attnkit.nn.limits``; NaN and inf are never accepted); ``attnkit train``'s options are built from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..nn.limits import SEED, check_fields, floats, ints
from .schedule import SCHEDULES

PICKS = ("best", "last")  # which checkpoint is the run's model

__all__ = ["TrainConfig"]

STEPS = ints(0, 10**9)  # counts of optimiser steps


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings. ``max_steps`` > 0 overrides ``epochs``; ``eval_every`` 0 = once per epoch.
    ``batch_tokens`` > 0 (tasks with ``lengths``): batches of up to that many padded tokens per process
    instead of ``batch_size`` examples."""

    epochs: int = field(default=10, metadata={"help": "passes over the training data (unless max_steps > 0)",
                                              "range": ints(1, 10**6)})
    max_steps: int = field(default=0, metadata={
        "help": "stop after this many optimiser steps, overriding epochs (0 = run the epochs)", "range": STEPS})
    batch_size: int = field(default=32, metadata={
        "help": "training examples per step (per process under torchrun)", "range": ints(1, 2**20)})
    batch_tokens: int = field(default=0, metadata={
        "help": "if > 0: batches of about this many tokens (examples of similar length together) instead of "
                "batch_size examples", "range": ints(0, 2**24)})
    lr: float = field(default=1e-3, metadata={"help": "peak learning rate of AdamW, reached after the warm-up",
                                              "range": floats(0, 10, open_low=True)})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW's decoupled weight decay (0 = none)",
                                                         "range": floats(0, 10)})
    schedule: str = field(default="linear", metadata={
        "help": "learning rate after the warm-up: linear or cosine decay to 0, inverse_sqrt (the paper's "
                "1/sqrt(step) decay), or constant",
        "choices": SCHEDULES})
    warmup_steps: int = field(default=100, metadata={
        "help": "steps of linear warm-up from 0 to lr (0 = none; inverse_sqrt peaks at this step); linear and "
                "cosine warm up over at most half the run (--max-steps below it: its first half), and say so; "
                "inverse_sqrt and constant keep it and warn when the run ends first",
        "range": STEPS})
    clip_norm: float = field(default=1.0, metadata={
        "help": "clip the gradient's global norm to this (0 = no clipping)", "range": floats(0, 1e6)})
    label_smoothing: float = field(default=0.0, metadata={
        "help": "label smoothing of the cross-entropy", "range": floats(0, 1, open_high=True)})
    seed: int = field(default=0, metadata={"help": "random seed: initialisation, batch order, dropout",
                                           "range": SEED})
    bf16: bool = field(default=False, metadata={"help": "compute in bfloat16 autocast (weights stay float32)"})
    eval_every: int = field(default=0, metadata={
        "help": "score the dev set every this many steps (0 = at the end of each epoch)", "range": STEPS})
    log_every: int = field(default=20, metadata={
        "help": "write the training loss to metrics.jsonl every this many steps", "range": ints(1, 10**9)})
    eval_batch_size: int = field(default=128, metadata={"help": "examples per batch when scoring dev and test",
                                                        "range": ints(1, 2**20)})
    keep: int = field(default=2, metadata={
        "help": "newest checkpoints kept on disk, besides the best and the latest (0 = only those two)",
        "range": ints(0, 10**6)})
    pick: str = field(default="best", metadata={
        "help": "the checkpoint that is the run's model (best.json, scored on test): best = the best dev score; "
                "last = the end of training, for a dev set too small to choose by", "choices": PICKS})
    max_minutes: float = field(default=0.0, metadata={
        "help": "stop this invocation after this many minutes of training and save; --resume continues it "
                "exactly. The schedule follows steps, not the clock (0 = no limit)", "range": floats(0, 10**7)})
    progress: bool | None = field(default=None, metadata={
        "help": "progress bars on stderr (None: only when stderr is a terminal)"})

    def __post_init__(self):
        check_fields(self)  # every number in its range (metadata["range"])
        if self.schedule not in SCHEDULES:
            raise ValueError(f"TrainConfig: `schedule` must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.pick not in PICKS:
            raise ValueError(f"TrainConfig: `pick` must be one of {PICKS}, got {self.pick!r}")
        if self.progress not in (None, True, False):
            raise ValueError(f"TrainConfig: `progress` must be True, False or None (automatic), "
                             f"got {self.progress!r}")
