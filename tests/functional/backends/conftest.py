"""Fixtures shared by the backend tests."""

from __future__ import annotations

import pytest

from attnkit.functional import native


@pytest.fixture(scope="module")
def native_kernel(cpu_variant):
    """The compiled native kernel module of each variant this CPU runs; skips where it cannot be built (no C++
    compiler)."""
    kern = native.kernel(cpu_variant)
    if kern is None:
        pytest.skip(f"native kernel unavailable here: {native.unavailable(cpu_variant)}")
    return kern
