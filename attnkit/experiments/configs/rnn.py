"""``RnnConfig``, the RNN experiment's settings, and ``QUICK``, its ``--quick`` sizes, in a module without torch:
``attnkit experiment rnn --help`` is built from their fields. ``attnkit.experiments.rnn`` runs the experiment."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...nn.limits import ints
from .fields import check, lr_field, seeds_field, trained_field

__all__ = ["RnnConfig", "MODELS", "QUICK"]

MODELS = ("gru", "lstm", "self-attention")


@dataclass(frozen=True)
class RnnConfig:
    """The RNN experiment: lengths, models, width, the step budget and the learning rates."""

    lengths: tuple[int, ...] = field(default=(16, 32, 64, 128, 256, 512), metadata={
        "help": "sequence lengths L trained and scored: the marked token is L - 1 tokens before the answer"})
    models: tuple[str, ...] = trained_field(MODELS)
    seeds: int = seeds_field("data and initialisation")
    vocab: int = field(default=16, metadata={"help": "symbols a token takes (chance = 1 / vocab)",
                                             "range": ints(2, 4096)})
    d_model: int = field(default=64, metadata={"help": "width of every model (RNN hidden size, attention d)",
                                               "range": ints(4, 1024)})
    steps: int = field(default=400, metadata={"help": "training steps at every length", "range": ints(1, 10**6)})
    batch_size: int = field(default=16, metadata={"help": "sequences per step", "range": ints(1, 4096)})
    gru_lr: float = lr_field(1e-2, " for the GRU")
    lstm_lr: float = lr_field(3e-3, " for the LSTM")
    attention_lr: float = lr_field(3e-3, " for self-attention")
    test_sequences: int = field(default=1000, metadata={"help": "test sequences per length (and as many dev)",
                                                        "range": ints(1, 10**6)})
    timing_steps: int = field(default=5, metadata={
        "help": "the timing sweep: timed training steps per model, length and thread count, median (0 = no sweep)",
        "range": ints(0, 1000)})
    timing_lengths: tuple[int, ...] = field(default=(16, 32, 64, 128, 256, 512, 1024), metadata={
        "help": "the timing sweep's sequence lengths (no training: a few steps each, so it reaches further)"})

    def __post_init__(self):
        check(self, whole={"lengths": (2, 65536), "timing_lengths": (2, 65536)}, choices={"models": MODELS}, heads=4)


QUICK = RnnConfig(lengths=(8, 16, 32), seeds=2, d_model=16, steps=6, batch_size=8, test_sequences=64,
                  timing_steps=1, timing_lengths=(8, 16, 32))
