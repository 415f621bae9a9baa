"""What the experiments' configs share, without torch (``attnkit experiment NAME --help`` is built from the
configs): the fields ``trained_field(choices)`` (the models, or encodings, to train: all by default, a
comma-separated list of some on the command line), ``seeds_field(what)`` (seeds per point), ``lr_field(default,
of)`` (AdamW's peak learning rate), and ``check(config, choices=..., whole=..., heads=...)``, what every config's
``__post_init__`` checks first."""

from __future__ import annotations

from dataclasses import field

from ...nn.limits import check_fields, check_unique, floats, ints

__all__ = ["trained_field", "seeds_field", "lr_field", "check"]

LR = floats(0, 1, open_low=True)


def trained_field(choices: tuple[str, ...], what: str = "the models to train"):
    """The config field of what an experiment trains: every one of ``choices`` by default."""
    return field(default=choices, metadata={"help": what, "choices": choices})


def seeds_field(what: str):
    """The config field of the seeds per point, 3 by default; ``what`` says what a seed sets."""
    return field(default=3, metadata={"help": f"seeds per point (0, 1, ...): {what}", "range": ints(1, 100)})


def lr_field(default: float, of: str = ""):
    """A config field of AdamW's peak learning rate (``of``: " for the GRU", ...)."""
    return field(default=default, metadata={"help": f"AdamW's peak learning rate{of}", "range": LR})


def check(config, *, choices: dict[str, tuple[str, ...]] | None = None,
          whole: dict[str, tuple[int, int]] | None = None, heads: int | None = None) -> None:
    """Every field's range (``check_fields``); the list fields of ``choices`` and ``whole`` name each value once,
    are not empty and hold only ``choices[name]``, or whole numbers in ``whole[name]`` = [lo, hi]; ``heads``:
    ``d_model`` a multiple of it. A ValueError ``Config: `field` ...``."""
    choices, whole = choices or {}, whole or {}
    name = type(config).__name__
    check_fields(config)
    check_unique(config, *whole, *choices)
    for f, (lo, hi) in whole.items():
        values = getattr(config, f)
        if not values or any(not isinstance(n, int) or n < lo or n > hi for n in values):
            raise ValueError(f"{name}: `{f}` must be whole numbers in [{lo}, {hi}], got {values}")
    for f, allowed in choices.items():
        values = getattr(config, f)
        if not values or any(v not in allowed for v in values):
            raise ValueError(f"{name}: `{f}` must be some of {allowed}, got {values}")
    if heads is not None and config.d_model % heads:
        raise ValueError(f"{name}: `d_model` must be a multiple of the {heads} heads, got {config.d_model}")
