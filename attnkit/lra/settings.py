"""LRA-lite sizes: one ``TaskSettings`` per task and suite ("full": the benchmark, "quick": tiny sizes).

Every variant of a task trains the same model (only the attention differs) for the same number of
steps on the same data, as in LRA. The full suite is sized to finish in under 3 hours on 2 CPU
cores; "quick" in a few minutes (the tests run a part of it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

__all__ = ["TaskSettings", "SUITES", "TASKS", "suite_settings"]

TASKS = ("listops", "text", "image", "pathfinder")  # LRA's order; "text" runs only where IMDb is present


@dataclass(frozen=True)
class TaskSettings:
    """Data, model and optimisation of one task. ``seq_len``: the longest input (ListOps: the longest
    tree, lengths from seq_len / 4 as LRA's 500-2,000; pathfinder: side^2; image: (28 / pool)^2; text: bytes)."""

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

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"TaskSettings: `task` must be one of {TASKS}, got {self.task!r}")
        for name in ("seq_len", "n_train", "n_val", "n_test", "steps", "batch_size", "d_model", "num_heads",
                     "d_ff", "num_layers", "evals"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"TaskSettings: `{name}` must be a positive integer, got {v!r}")
        if self.pooling not in ("mean", "max", "meanmax", "first"):
            raise ValueError(f"TaskSettings: `pooling` must be mean, max, meanmax or first, got {self.pooling!r}")

    def options_for(self, variant: str) -> dict:
        return dict(self.variant_options.get(variant, {}))

    def to_dict(self) -> dict:
        return asdict(self)

    def replace(self, **changes) -> TaskSettings:
        return replace(self, **changes)


_SMALL_WINDOWS = {"local": {"window": 8}, "longformer": {"window": 8}, "performer": {"num_features": 16},
                  "linformer": {"k": 16}, "nystrom": {"num_landmarks": 8}}

SUITES: dict[str, dict[str, TaskSettings]] = {
    "full": {
        # ListOps at LRA's lengths (500 < L < 2,000); "first" pooling = LRA's CLS mode (the top operator's place).
        "listops": TaskSettings("listops", 2000, 8_000, 500, 1_000, steps=600, batch_size=8, lr=1e-3,
                                warmup_steps=60, pooling="first"),
        "text": TaskSettings("text", 1000, 8_000, 500, 1_000, steps=500, batch_size=8, warmup_steps=50),
        # Image and Pathfinder: 2.5 passes over the 8,000 training examples (500 steps left every model
        # near chance on Pathfinder and full attention at 24% on MNIST's dev set, still climbing).
        "image": TaskSettings("image", 784, 8_000, 500, 1_000, steps=2500, batch_size=8, warmup_steps=250, evals=5),
        "pathfinder": TaskSettings("pathfinder", 1024, 8_000, 500, 1_000, steps=2500, batch_size=8,
                                   warmup_steps=250, evals=5),
    },
    "quick": {task: TaskSettings(task, n, 400, 48, 96, steps=20, batch_size=8, lr=2e-3, warmup_steps=4, d_model=32,
                                 d_ff=64, evals=1, pooling="first" if task == "listops" else "mean",
                                 variant_options=_SMALL_WINDOWS)
              for task, n in (("listops", 200), ("text", 128), ("image", 196), ("pathfinder", 256))},
}


def suite_settings(suite: str, task: str) -> TaskSettings:
    if suite not in SUITES:
        raise ValueError(f"lra: unknown suite {suite!r}; known: {sorted(SUITES)}")
    if task not in SUITES[suite]:
        raise ValueError(f"lra: unknown task {task!r}; known: {list(SUITES[suite])}")
    return SUITES[suite][task]
