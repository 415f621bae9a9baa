"""LRA-lite sizes: one ``TaskSettings`` per task and suite ("full": the benchmark, "quick": tiny sizes).

Every variant of a task trains the same model (only the attention differs) for the same number of
steps on the same data, as in LRA. A suite's tasks are named (``SUITES[suite]``'s keys: "listops",
"mqar-d128", ...); each names its data family in ``task`` (``FAMILIES``). Three seeds per cell; on 2 CPU
cores MQAR, ListOps and the image take minutes per cell, a Pathfinder cell about half an hour (BENCHMARKS.md
has the measured figures); "quick" runs every cell in tiny sizes in a few minutes (the tests run a part of it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

__all__ = ["TaskSettings", "SUITES", "FAMILIES", "TASKS", "SEEDS", "suite_settings"]

FAMILIES = ("listops", "text", "image", "pathfinder", "mqar")  # "text" runs only where IMDb is present
SEEDS = (0, 1, 2)  # the full suite's seeds: data generators and training


@dataclass(frozen=True)
class TaskSettings:
    """Data, model and optimisation of one task. ``seq_len``: the longest input (ListOps: the longest
    tree, lengths from seq_len / 4 as LRA's 500-2,000 unless ``generator`` sets ``min_length``;
    pathfinder: side^2; image: (28 / pool)^2; text: bytes; mqar: every sequence)."""

    task: str
    seq_len: int
    n_train: int
    n_val: int
    n_test: int
    steps: int
    batch_size: int
    lr: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    d_model: int = 64
    num_heads: int = 2
    d_ff: int = 128
    num_layers: int = 2
    dropout: float = 0.1
    pooling: str = "mean"
    evals: int = 2  # dev evaluations during training (the best one's weights are tested)
    variant_options: dict = field(default_factory=dict)  # variant -> options overriding its defaults
    generator: dict = field(default_factory=dict)  # options of the data generator (ListOps, MQAR, Pathfinder)
    pretrain_steps: int = 0  # self-pretraining on masked input tokens before the labels (0 = none)
    pretrain_mask: float = 0.15  # share of the input tokens masked in self-pretraining
    pretrain_lr: float = 1e-3
    token_shift: bool = False  # each position also embeds its predecessor's token (MQAR)
    label: str = ""  # the task's column heading

    def __post_init__(self):
        if self.task not in FAMILIES:
            raise ValueError(f"TaskSettings: `task` must be one of {FAMILIES}, got {self.task!r}")
        for name in ("seq_len", "n_train", "n_val", "n_test", "steps", "batch_size", "d_model", "num_heads",
                     "d_ff", "num_layers", "evals"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"TaskSettings: `{name}` must be a positive integer, got {v!r}")
        if not isinstance(self.pretrain_steps, int) or self.pretrain_steps < 0:
            raise ValueError(f"TaskSettings: `pretrain_steps` must be an integer >= 0, got {self.pretrain_steps!r}")
        if not 0 < self.pretrain_mask < 1:
            raise ValueError(f"TaskSettings: `pretrain_mask` must be in (0, 1), got {self.pretrain_mask!r}")
        if self.pooling not in ("mean", "max", "meanmax", "first"):
            raise ValueError(f"TaskSettings: `pooling` must be mean, max, meanmax or first, got {self.pooling!r}")
        if self.task == "mqar" and self.pooling == "meanmax":
            raise ValueError("TaskSettings: mqar scores every position with the output layer; use mean pooling")

    def options_for(self, variant: str) -> dict:
        return dict(self.variant_options.get(variant, {}))

    def to_dict(self) -> dict:
        return asdict(self)

    def replace(self, **changes) -> TaskSettings:
        return replace(self, **changes)


_SMALL_WINDOWS = {"local": {"window": 8}, "longformer": {"window": 8}, "performer": {"num_features": 16},
                  "linformer": {"k": 16}, "nystrom": {"num_landmarks": 8}}
_MQAR_OPTIONS = {"local": {"window": 16}, "longformer": {"window": 16}, "performer": {"num_features": 64},
                 "linformer": {"k": 64}, "nystrom": {"num_landmarks": 32}}


def _mqar(d_model: int, **changes) -> TaskSettings:
    s = TaskSettings("mqar", 128, 20_000, 500, 1_000, steps=600, batch_size=32, lr=2e-3, warmup_steps=60,
                     weight_decay=0.1, d_model=d_model, d_ff=2 * d_model, dropout=0.0, evals=6,
                     variant_options=_MQAR_OPTIONS, generator={"num_pairs": 16, "vocab_size": 130},
                     token_shift=True, label=f"MQAR d={d_model}")
    return s.replace(**changes)


SUITES: dict[str, dict[str, TaskSettings]] = {
    "full": {
        # ListOps at LRA's lengths (500 < L < 2,000); "first" pooling = LRA's CLS mode (the top operator's place).
        "listops": TaskSettings("listops", 2000, 8_000, 500, 1_000, steps=600, batch_size=8, lr=1e-3,
                                warmup_steps=60, pooling="first", label="ListOps (LRA)"),
        # ListOps that full attention can compute: depth <= 3, <= 5 arguments, 4-63 tokens.
        "listops-short": TaskSettings("listops", 64, 20_000, 500, 1_000, steps=1500, batch_size=32, lr=1e-3,
                                      warmup_steps=150, evals=6, generator={"max_depth": 4, "max_args": 5,
                                                                            "min_length": 3},
                                      label="ListOps depth <= 3"),
        "text": TaskSettings("text", 1000, 8_000, 500, 1_000, steps=500, batch_size=8, warmup_steps=50,
                             label="Text (IMDb bytes)"),
        # MNIST's centre 20 x 20 pixels in 2 x 2 pools: 100 tokens.
        "image": TaskSettings("image", 100, 20_000, 1_000, 2_000, steps=1500, batch_size=32, lr=3e-3,
                              warmup_steps=150, evals=6, label="Image (MNIST 10x10)"),
        "pathfinder": TaskSettings("pathfinder", 256, 8_000, 500, 1_000, steps=3000, batch_size=32,
                                   warmup_steps=300, evals=6, pretrain_steps=1000, pretrain_mask=0.5,
                                   label="Pathfinder-16"),
        # The same cells without self-pretraining (the labels from the first step).
        "pathfinder-scratch": TaskSettings("pathfinder", 256, 8_000, 500, 1_000, steps=3000, batch_size=32,
                                           warmup_steps=300, evals=6, label="Pathfinder-16, no pretraining"),
        "mqar": _mqar(64),
        "mqar-d128": _mqar(128),
    },
}


def _quick(name: str, s: TaskSettings) -> TaskSettings:
    """The full suite's task in tiny sizes (seconds per cell): same model kind, data family and phases."""
    seq_len = {"listops": 200, "text": 128}.get(name, min(s.seq_len, 256))
    extra = {"seq_len": 128, "generator": {"num_pairs": 8, "vocab_size": 40}} if s.task == "mqar" else {}
    return s.replace(**{"seq_len": seq_len, "n_train": 400, "n_val": 48, "n_test": 96, "steps": 20, "batch_size": 8,
                        "lr": 2e-3, "warmup_steps": 4, "d_model": max(16, s.d_model // 4), "d_ff": max(32, s.d_ff // 4),
                        "evals": 1, "variant_options": _SMALL_WINDOWS, "pretrain_steps": min(s.pretrain_steps, 10),
                        **extra})


SUITES["quick"] = {name: _quick(name, s) for name, s in SUITES["full"].items()}
TASKS = tuple(dict.fromkeys(name for suite in SUITES.values() for name in suite))  # every task name
# attnkit.nn.variants.VARIANTS' names, in its order, read without importing torch (the command line's choices;
# tests/lra/test_variant_names.py keeps the two equal)
VARIANT_NAMES = ("full", "local", "longformer", "sparse", "linear", "performer", "linformer", "nystrom")


def suite_settings(suite: str, task: str) -> TaskSettings:
    if suite not in SUITES:
        raise ValueError(f"lra: unknown suite {suite!r}; known: {sorted(SUITES)}")
    if task not in SUITES[suite]:
        raise ValueError(f"lra: unknown task {task!r} in the {suite} suite; known: {list(SUITES[suite])}")
    return SUITES[suite][task]
