"""The fuzz of every backend against the math path (``fuzz_attention.py``), in a subprocess: a crash of the
interpreter (a native kernel reading out of bounds) fails this test instead of ending the test run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from attnkit.functional.native import isa

EXAMPLES = 1200  # ~40 s on this project's 2-core machine; the script takes a count and a seed to explore more
LOWER_EXAMPLES = 300  # each lower variant of the native kernels (tests/conftest.py's cpu_variant)


def test_every_backend_crashes_never_and_raises_or_matches_math(cpu_variant):
    script = Path(__file__).with_name("fuzz_attention.py")
    count = EXAMPLES if cpu_variant == isa.supported()[0] else LOWER_EXAMPLES
    # this checkout's attnkit, not an installed one: a script's sys.path starts at its own folder
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), str(count)], capture_output=True, text=True, timeout=600,
                          env=env)
    tail = "\n".join(done.stdout.splitlines()[-3:])
    assert done.returncode == 0, f"exit {done.returncode}; last examples:\n{tail}\n{done.stderr[-3000:]}"
    assert done.stdout.splitlines()[-1] == "ok", tail
