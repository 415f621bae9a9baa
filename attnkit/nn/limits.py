"""Limits on sizes before anything is allocated: the range of every number a user gives, and the memory the
machine has.

``Range``: the values a numeric option or config field accepts (whole numbers, or finite floats: NaN and
inf are never in a range). A config field states it once, ``field(metadata={"help": ..., "range":
ints(1, 65536)})``: ``check_fields`` validates the dataclass with it (the Python API), and
``attnkit.tasks.options.add_config_args`` makes it the option's argparse ``type`` (the command line, where
the help shows it and a value outside it is refused while parsing). A plain option takes a ``Range`` as its
``type`` directly.

``available_memory`` / ``check_memory``: what the machine can still give, and a one-line ValueError when an
estimate of what some work needs is more than that.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
from dataclasses import dataclass, fields
from pathlib import Path

__all__ = ["Range", "ints", "floats", "SEED", "check_fields", "check_unique", "available_memory", "check_memory",
           "gigabytes"]


@dataclass(frozen=True)
class Range:
    """Whole numbers (``kind=int``) or finite floats in ``low .. high``; ``open_low`` / ``open_high`` leave an
    end out. Called on a command-line string it parses and checks it (an argparse ``type``)."""

    kind: type
    low: float
    high: float
    open_low: bool = False
    open_high: bool = False

    def span(self) -> str:
        """``[1, 65536]``, ``[0, 1)``, ``(0, 10]``."""
        return (f"{'(' if self.open_low else '['}{_num(self.low)}, {_num(self.high)}"
                f"{')' if self.open_high else ']'}")

    def text(self) -> str:
        """What the range accepts, in words: ``an integer in [1, 65536]``, ``a number in [0, 1)``."""
        return f"{'an integer' if self.kind is int else 'a number'} in {self.span()}"

    def contains(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if self.kind is int else numbers.Real):
            return False
        if self.kind is not int and not math.isfinite(value):
            return False
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    def check(self, value, name: str):
        """``value`` if it is in the range; else a ValueError ``{name} must be ..., got ...``."""
        if not self.contains(value):
            raise ValueError(f"{name} must be {self.text()}, got {value!r}")
        return value

    def __call__(self, text: str):
        """Parse one command-line value (argparse ``type``); outside the range: argparse's one-line error."""
        try:
            value = self.kind(text)
        except (TypeError, ValueError):
            value = None
        if value is None or not self.contains(value):
            raise argparse.ArgumentTypeError(f"must be {self.text()}, got {text!r}")
        return value

    @property
    def __name__(self) -> str:  # argparse names a type by it in some messages
        return self.kind.__name__


def ints(low: int, high: int) -> Range:
    """Whole numbers from ``low`` to ``high``, both included."""
    return Range(int, low, high)


def floats(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Range:
    """Finite numbers from ``low`` to ``high`` (an end left out with ``open_low`` / ``open_high``)."""
    return Range(float, low, high, open_low, open_high)


SEED = ints(0, 2**63 - 1)  # what torch's, numpy's (modulo 2**32) and Python's generators all take


def _num(x: float) -> str:
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e16):
        return str(int(x))
    return f"{x:g}"


def check_fields(obj, what: str | None = None) -> None:
    """Check every field of the dataclass ``obj`` whose metadata has a ``"range"``; a ValueError
    ``Class: `field` must be ..., got ...`` (``what`` in place of the class name where given). None passes where
    the field's default is None."""
    for f in fields(obj):
        rng = f.metadata.get("range")
        value = getattr(obj, f.name)
        if rng is None or (value is None and f.default is None):
            continue
        rng.check(value, f"{what or type(obj).__name__}: `{f.name}`")


def check_unique(obj, *names: str) -> None:
    """The fields ``names`` of the dataclass ``obj`` (tuples: lengths, encodings to run) each name a value once;
    a ValueError ``Class: `field` holds 8 twice`` (a repeated value would run the same work again)."""
    for name in names:
        seen = set()
        for v in getattr(obj, name):
            if v in seen:
                raise ValueError(f"{type(obj).__name__}: `{name}` holds {v!r} twice; give each value once")
            seen.add(v)


def gigabytes(n: float) -> str:
    """Bytes as ``12.3 GB`` (or MB below one GB)."""
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def available_memory(meminfo: str | os.PathLike = "/proc/meminfo",
                     cgroup: str | os.PathLike = "/sys/fs/cgroup") -> int | None:
    """Bytes the machine can still give this process: ``MemAvailable`` of ``meminfo`` (Linux), else the free
    physical pages (``os.sysconf``), lowered to a cgroup v2 limit's headroom when there is one; None when
    nothing says."""
    have = None
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                have = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if have is None:
        try:
            have = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            return None
    try:
        limit = (Path(cgroup) / "memory.max").read_text().strip()
        used = int((Path(cgroup) / "memory.current").read_text())
        if limit != "max":
            have = min(have, max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return have


def check_memory(need: float, what: str, available: int | None = None) -> None:
    """A one-line ValueError when ``need`` bytes (an estimate of ``what``) exceed the memory available
    (``available``, else ``available_memory()``); nothing when the machine does not say."""
    have = available_memory() if available is None else available
    if have is not None and need > have:
        raise ValueError(f"{what} needs about {gigabytes(need)} of memory (an estimate), more than the "
                         f"{gigabytes(have)} this machine has available")
