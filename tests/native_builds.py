"""The native extensions' builds a test run needs, made as many at a time as there are pytest-xdist workers, as
the workers start (``tests/conftest.py``'s ``pytest_sessionstart``).

The tests run every variant this CPU runs (``cpu_variant``), of both extensions (``attnkit_native`` and the
inference layer's ``attnkit_inference``): six builds on an AVX-512 host, each a fraction of a minute, all missing on
a fresh clone. Left to the workers, both need the same build at about the same time (the best variant's as soon as
they import the test modules), and one waits on torch's build lock while the other compiles, one build after
another. Made here, each in a subprocess of its own, the best variant's first, both cores compile; a worker that
needs a build being made waits for it as before. A build that fails here is only tried again by the workers,
which report it as they would without this."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attnkit.functional import native
from attnkit.inference.native import CSRC as INFERENCE_CSRC

__all__ = ["missing", "build"]

# One build each (the inference one by itself: ``native.extension`` would load the kernels' build first).
CODE = {"attnkit_native": "from attnkit.functional import native; native.kernel({v!r})",
        "attnkit_inference": "from attnkit.functional import native; from attnkit.inference.native import CSRC; "
                             "native._extension(CSRC, 'attnkit_inference', {v!r})"}


def _library(prefix: str, variant: str) -> Path:
    from torch.utils.cpp_extension import _get_build_directory  # where native._load builds it

    dirs = (INFERENCE_CSRC,) if prefix == "attnkit_inference" else ()
    name = native.build_name(dirs, prefix, variant)
    return Path(_get_build_directory(name, verbose=False)) / f"{name}.so"


def missing() -> list[tuple[str, str]]:
    """(prefix, variant) of each build the tests load that is not in torch's extension cache, the best variant's
    first (the workers load it as they import the test modules)."""
    return [(p, v) for v in native.isa.supported() for p in CODE if not _library(p, v).exists()]


def _build(prefix: str, variant: str, cwd: Path) -> bool:
    done = subprocess.run([sys.executable, "-c", CODE[prefix].format(v=variant)], cwd=cwd, capture_output=True,
                          text=True, timeout=1800)
    return done.returncode == 0 and _library(prefix, variant).exists()


def build(todo: list[tuple[str, str]], jobs: int, cwd: Path) -> tuple[int, float]:
    """Build ``todo``, ``jobs`` at a time, from ``cwd`` (the checkout whose attnkit the tests import) -> (how many
    built, seconds)."""
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        built = sum(pool.map(lambda pv: _build(*pv, cwd), todo))
    return built, time.monotonic() - start
