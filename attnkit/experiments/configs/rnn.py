"""``RnnConfig``, the RNN experiment's settings, and ``QUICK``, its ``--quick`` sizes, in a module without torch:
``attnkit experiment rnn --help`` is built from their fields. ``attnkit.experiments.rnn`` runs the experiment."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...nn.limits import check_fields, check_unique, floats, ints

__all__ = ["RnnConfig", "MODELS", "QUICK"]

MODELS = ("gru", "lstm", "self-attention")


@dataclass(frozen=True)
class RnnConfig:
    """The RNN experiment: lengths, models, width, the step budget and the learning rates."""

    lengths: tuple[int, ...] = field(default=(16, 32, 64, 128, 256, 512), metadata={
        "help": "sequence lengths L trained and scored: the marked token is L - 1 tokens before the answer"})
    models: tuple[str, ...] = field(default=MODELS, metadata={"help": "the models to train", "choices": MODELS})
    seeds: int = field(default=3, metadata={"help": "seeds per point (0, 1, ...): data and initialisation",
                                            "range": ints(1, 100)})
    vocab: int = field(default=16, metadata={"help": "symbols a token takes (chance = 1 / vocab)",
                                             "range": ints(2, 4096)})
    d_model: int = field(default=64, metadata={"help": "width of every model (RNN hidden size, attention d)",
                                               "range": ints(4, 1024)})
    steps: int = field(default=400, metadata={"help": "training steps at every length", "range": ints(1, 10**6)})
    batch_size: int = field(default=16, metadata={"help": "sequences per step", "range": ints(1, 4096)})
    gru_lr: float = field(default=1e-2, metadata={"help": "AdamW's peak learning rate for the GRU",
                                                  "range": floats(0, 1, open_low=True)})
    lstm_lr: float = field(default=3e-3, metadata={"help": "AdamW's peak learning rate for the LSTM",
                                                   "range": floats(0, 1, open_low=True)})
    attention_lr: float = field(default=3e-3, metadata={"help": "AdamW's peak learning rate for self-attention",
                                                        "range": floats(0, 1, open_low=True)})
    test_sequences: int = field(default=1000, metadata={"help": "test sequences per length (and as many dev)",
                                                        "range": ints(1, 10**6)})
    timing_steps: int = field(default=5, metadata={
        "help": "the timing sweep: timed training steps per model, length and thread count, median (0 = no sweep)",
        "range": ints(0, 1000)})
    timing_lengths: tuple[int, ...] = field(default=(16, 32, 64, 128, 256, 512, 1024), metadata={
        "help": "the timing sweep's sequence lengths (no training: a few steps each, so it reaches further)"})

    def __post_init__(self):
        check_fields(self)
        check_unique(self, "lengths", "models", "timing_lengths")
        if not self.lengths or any(not isinstance(n, int) or n < 2 or n > 65536 for n in self.lengths):
            raise ValueError(f"RnnConfig: `lengths` must be whole numbers in [2, 65536], got {self.lengths}")
        if not self.timing_lengths or any(not isinstance(n, int) or n < 2 or n > 65536 for n in self.timing_lengths):
            raise ValueError(f"RnnConfig: `timing_lengths` must be whole numbers in [2, 65536], got "
                             f"{self.timing_lengths}")
        if not self.models or any(m not in MODELS for m in self.models):
            raise ValueError(f"RnnConfig: `models` must be some of {MODELS}, got {self.models}")
        if self.d_model % 4:
            raise ValueError(f"RnnConfig: `d_model` must be a multiple of the 4 heads, got {self.d_model}")


QUICK = RnnConfig(lengths=(8, 16, 32), seeds=2, d_model=16, steps=6, batch_size=8, test_sequences=64,
                  timing_steps=1, timing_lengths=(8, 16, 32))
