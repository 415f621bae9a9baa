"""The training engine: plain PyTorch loop, atomic checksummed checkpoints (no pickle), exact resume,
metrics, progress output, torchrun/DDP.

See ``attnkit.train.engine`` for how a task plugs in (a ``Task``: model, examples, collate,
forward -> (logits, targets), meta). Each name is imported from its module on first use: the command line reads
``TrainConfig`` and run folders' meta without importing torch.
"""

from ..lazy import lazy_names

_WHERE = {
    "checkpoint": ("CheckpointError", "load_meta", "load_weights", "resolve", "save_checkpoint"),
    "config": ("TrainConfig",),
    "engine": ("Task", "Trainer"),
    "evaluation": ("evaluate", "to_device"),
    "metrics": ("IGNORE", "MetricsLog", "plot_curves", "read_metrics"),
    "schedule": ("SCHEDULES", "lr_factor", "make_scheduler", "paper_lr"),
}
__getattr__, __all__ = lazy_names(__name__, _WHERE)
