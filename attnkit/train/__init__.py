"""The training engine: plain PyTorch loop, atomic checksummed checkpoints (no pickle), exact resume,
metrics, progress output, torchrun/DDP.

See ``attnkit.train.engine`` for how a task plugs in (a ``Task``: model, examples, collate,
forward -> (logits, targets), meta).
"""

from .checkpoint import CheckpointError, load_meta, load_weights, resolve, save_checkpoint
from .engine import Task, TrainConfig, Trainer
from .evaluation import evaluate, to_device
from .metrics import IGNORE, MetricsLog, plot_curves, read_metrics
from .schedule import SCHEDULES, lr_factor, make_scheduler, paper_lr

__all__ = ["Task", "TrainConfig", "Trainer", "evaluate", "to_device", "save_checkpoint", "load_meta",
           "load_weights", "resolve", "CheckpointError", "IGNORE", "MetricsLog", "plot_curves",
           "read_metrics", "SCHEDULES", "lr_factor", "make_scheduler", "paper_lr"]
