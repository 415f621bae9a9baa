"""Fixtures shared by the backend tests."""

from __future__ import annotations

import pytest

from attnkit.functional import native


@pytest.fixture(scope="module")
def native_kernel():
    """The compiled native kernel module; skips where it cannot be built (no AVX-512 or no compiler)."""
    kern = native.kernel()
    if kern is None:
        pytest.skip("native kernel unavailable here (needs AVX-512 and a C++ compiler)")
    return kern
