"""matplotlib for figures drawn outside ``viz`` (training curves, the LRA suite's figures, reading images):
``pyplot()``, matplotlib's pyplot on the Agg backend (an ImportError saying how to install it where matplotlib is
missing), and ``save_figure(fig, path)``, a PNG written atomically at the figures' DPI. The public face of what
every figure of ``viz`` uses."""

from __future__ import annotations

import os
from pathlib import Path

from .heatmap import _pyplot, _save

__all__ = ["pyplot", "save_figure"]


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend."""
    return _pyplot()


def save_figure(fig, path: str | os.PathLike) -> Path:
    """``fig`` as a PNG at ``path`` (folders made, written beside it and renamed in) -> the path."""
    return _save(fig, path)
