"""Shared pytest markers."""

import pytest


def _native_problem() -> str | None:
    from attnkit.functional import native

    return native.unavailable() if native.kernel() is None else None


# Tests that check a native kernel's own path (that it was taken, its entry checks): skipped, saying why,
# where no variant of the kernels builds (no C++ compiler); every caller's PyTorch path is tested there instead.
needs_native = pytest.mark.skipif(_native_problem() is not None,
                                  reason=f"attnkit's native kernel is unavailable: {_native_problem()}")
