"""Peak memory of a piece of work on CPU: the rise of the process's peak resident set (Linux).

``/proc/self/clear_refs`` with "5" resets the kernel's high-water mark (VmHWM) to the current
resident size; after the work, VmHWM minus the resident size at the reset is the most memory the work
held at once (allocator caches included, so measure in a fresh process before other large work).
Elsewhere ``peak_memory`` returns None.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["peak_memory", "status_kb"]

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def status_kb(field: str) -> int | None:
    """A ``/proc/self/status`` field in kB (``VmRSS``, ``VmHWM``), or None where there is none."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_memory(work: Callable[[], object]) -> tuple[object, float | None]:
    """Run ``work()``; return (its result, the peak extra resident memory in MB, or None if unmeasurable)."""
    try:
        _CLEAR.write_text("5")
        start = status_kb("VmRSS")
    except OSError:
        start = None
    result = work()
    peak = status_kb("VmHWM")
    if start is None or peak is None:
        return result, None
    return result, max(peak - start, 0) / 1024
