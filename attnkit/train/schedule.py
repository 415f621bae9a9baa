"""Learning-rate schedules: warm-up then decay, as multipliers of the base learning rate.

- ``linear``: linear warm-up to 1, then linear decay to 0 at ``total_steps``.
- ``cosine``: linear warm-up, then half a cosine to 0.
- ``inverse_sqrt``: the paper's schedule (Vaswani et al. 2017, eq. 3):
  lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5). The factor here is normalised to peak at 1
  at ``step = warmup``, so the base ``lr`` is the peak; ``paper_lr(d_model, warmup)`` gives the paper's peak.
- ``constant``: warm-up then flat.

``linear`` and ``cosine`` are laid out over the run, and their warm-up is at most half of it
(``effective_warmup``): ``--max-steps 30`` with ``--warmup-steps 400`` warms up over 15 steps and then
decays, instead of a learning rate that never reaches its peak. ``inverse_sqrt`` and ``constant`` do not
depend on the run's length (so a run continued with a larger ``--max-steps`` follows the same schedule)
and keep the warm-up asked for. The engine says which happened (``warmup_note``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

SCHEDULES = ("linear", "cosine", "inverse_sqrt", "constant")


def lr_factor(kind: str, step: int, warmup: int, total: int) -> float:
    """The multiplier of the base learning rate at optimiser step ``step`` (0-based)."""
    s = step + 1
    if kind not in SCHEDULES:
        raise ValueError(f"lr_factor: `kind` must be one of {SCHEDULES}, got {kind!r}")
    if warmup > 0 and s <= warmup and kind != "inverse_sqrt":
        return s / warmup
    if kind == "constant":
        return 1.0
    if kind == "inverse_sqrt":
        w = max(warmup, 1)
        return min(s ** -0.5, s * w ** -1.5) * w ** 0.5
    progress = min(1.0, (s - warmup) / max(1, total - warmup))
    if kind == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def effective_warmup(kind: str, warmup: int, total: int) -> int:
    """The warm-up a run of ``total`` steps uses: ``warmup``, for linear and cosine at most half the run."""
    return min(warmup, max(0, total) // 2) if kind in ("linear", "cosine") else warmup


def warmup_note(kind: str, warmup: int, total: int) -> str | None:
    """A line for a run whose warm-up does not fit it (None when it fits)."""
    used = effective_warmup(kind, warmup, total)
    if used < warmup:
        return (f"the warm-up of {warmup} steps is longer than half this run of {total} steps: warming up over "
                f"{used} steps instead")
    if warmup > total:
        return (f"the warm-up of {warmup} steps is longer than this run of {total} steps: the learning rate stops "
                f"at {total / warmup:.0%} of --lr ({kind} keeps the warm-up it is given)")
    return None


def paper_lr(d_model: int, warmup: int) -> float:
    """The peak learning rate of the paper's schedule: d_model^-0.5 * warmup^-0.5."""
    return d_model ** -0.5 * warmup ** -0.5


def make_scheduler(optimizer: torch.optim.Optimizer, kind: str, warmup: int, total: int,
                   progress=None) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` stepping once per optimiser step; its state_dict goes into checkpoints.

    ``progress``: optional callable returning a fraction in [0, 1] of a time budget used so far; the
    schedule then runs at ``max(step, progress() * total)``, so a time-limited run still decays fully.
    The warm-up is ``effective_warmup(kind, warmup, total)``: for linear and cosine at most half the run.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"make_scheduler: `kind` must be one of {SCHEDULES}, got {kind!r}")
    warmup = effective_warmup(kind, warmup, total)

    def factor(step: int) -> float:
        if progress is not None:
            step = max(step, min(total - 1, int(progress() * total)))
        return lr_factor(kind, step, warmup, total)

    import torch

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
