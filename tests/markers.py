"""Shared pytest markers."""

import pytest


def _native_problem() -> str | None:
    from attnkit.functional import native

    return native.unavailable() if native.kernel() is None else None


# Tests that check a native kernel's own path (that it was taken, its entry checks): skipped, saying why,
# where no variant of the kernels builds (no C++ compiler); every caller's PyTorch path is tested there instead.
needs_native = pytest.mark.skipif(_native_problem() is not None,
                                  reason=f"attnkit's native kernel is unavailable: {_native_problem()}")


def _espeak_problem() -> str | None:
    from attnkit.data.espeak import EspeakNotFound, find_engine

    try:
        find_engine()
    except EspeakNotFound as e:
        return str(e)
    return None


# Tests that synthesise speech (attnkit.data.synthetic_voices): skipped, saying why and how to install it, where
# eSpeak NG is not installed (it is an optional data source, never a dependency of attnkit).
needs_espeak = pytest.mark.skipif(_espeak_problem() is not None, reason=f"{_espeak_problem()}")
