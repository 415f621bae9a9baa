"""The training engine: plain PyTorch loop, atomic checksummed checkpoints (no pickle), exact resume,
metrics, progress output, torchrun/DDP.

See ``attnkit.train.engine`` for how a task plugs in (a ``Task``: model, examples, collate,
forward -> (logits, targets), meta). Each name is imported from its module on first use: the command line reads
``TrainConfig`` and run folders' meta without importing torch.
"""

_WHERE = {
    "checkpoint": ("CheckpointError", "load_meta", "load_weights", "resolve", "save_checkpoint"),
    "config": ("TrainConfig",),
    "engine": ("Task", "Trainer"),
    "evaluation": ("evaluate", "to_device"),
    "metrics": ("IGNORE", "MetricsLog", "plot_curves", "read_metrics"),
    "schedule": ("SCHEDULES", "lr_factor", "make_scheduler", "paper_lr"),
}
_MODULE = {name: module for module, names in _WHERE.items() for name in names}

__all__ = sorted(_MODULE)


def __getattr__(name):
    import importlib
    import importlib.util

    if name in _MODULE:
        return getattr(importlib.import_module(f".{_MODULE[name]}", __name__), name)
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f".{name}", __name__)  # a submodule, as when this package imported them all
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
