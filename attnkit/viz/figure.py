"""What every figure is drawn with, in ``viz`` and outside it (training curves, the LRA suite's figures, reading
images): ``pyplot()``, matplotlib's pyplot on the Agg backend (an ImportError saying how to install it where matplotlib
is missing); ``save_figure(fig, path)``, a PNG written atomically at the figures' ``DPI``, every text in it cut to
fit; ``ticks`` (tick labels thinned out to stay readable), ``short_text``, the one colour map of attention (``CMAP``)
and the figures' bounds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["pyplot", "save_figure", "ticks", "short_text", "CMAP", "DPI", "MAX_WIDTH_IN", "MAX_HEIGHT_IN",
           "MIN_LABEL_PT", "MAX_TEXT", "MAX_LABEL"]

CMAP = "Blues"  # white = 0, dark blue = high: the same scale as the HTML pages
MAX_WIDTH_IN = 16.0  # inches at DPI: figures stay under about 1900 px wide
MAX_HEIGHT_IN = 14.0
DPI = 120
MIN_LABEL_PT = 4.5  # below this a tick label cannot be read: thin the labels out
MAX_TEXT = 160  # characters of one title or label in a PNG: at 10 pt about 1,300 px, within MAX_WIDTH_IN
MAX_LABEL = 40  # characters of one tick label (a token, a word)


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (an ImportError saying how to install matplotlib where it is
    missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("attnkit.viz needs matplotlib: pip install 'attnkit[viz]'") from e
    return plt


def short_text(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` itself, or its first ``limit - 1`` characters and an ellipsis (a title, a label)."""
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def save_figure(fig, path: str | os.PathLike) -> Path:
    """Write ``fig`` as a PNG at ``path`` at ``DPI`` (folders made; written beside it and renamed in), every text in
    it cut first (titles ``MAX_TEXT`` characters, tick labels ``MAX_LABEL``): the tight bounding box follows the
    longest text, so a long one would widen the PNG unbounded. Returns the path."""
    from matplotlib.text import Text

    # the whole title also goes in the file (its Title text chunk), before the drawn one is cut to the figure
    title = fig._suptitle.get_text() if fig._suptitle is not None else ""
    width_pt = 72 * fig.get_size_inches()[0]
    for t in fig.findobj(Text):  # at most MAX_TEXT characters, and about the figure's width (0.6 em a character)
        limit = min(MAX_TEXT, max(24, int(width_pt / (0.6 * t.get_fontsize()))))
        if len(t.get_text()) > limit:
            t.set_text(short_text(t.get_text(), limit))
    for axis in (a for ax in fig.axes for a in (ax.xaxis, ax.yaxis)):  # tick labels come from their formatter
        labels = [t.get_text() for t in axis.get_ticklabels()]
        if any(len(t) > MAX_LABEL for t in labels):
            axis.set_ticks(axis.get_ticklocs(), labels=[short_text(t, MAX_LABEL) for t in labels])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=DPI, bbox_inches="tight", metadata={"Title": title} if title else None)
    os.replace(tmp, path)
    return path


def ticks(ax, axis: str, labels: Sequence[str] | None, n: int, room_in: float) -> None:
    """Label ``n`` ticks along ``axis`` in ``room_in`` inches: every label when they fit at a readable
    size, else every k-th; plain positions when there are no labels."""
    size = min(8.0, 72.0 * room_in / max(n, 1) * 0.9)
    step = 1 if size >= MIN_LABEL_PT else math.ceil(MIN_LABEL_PT / size)
    idx = list(range(0, n, step))
    names = [str(labels[i]) for i in idx] if labels is not None else [str(i + 1) for i in idx]
    font = max(size, MIN_LABEL_PT)
    if axis == "x":  # short labels stay upright
        ax.set_xticks(idx, labels=names, rotation=90 if max(map(len, names)) > 3 else 0, fontsize=font)
    else:
        ax.set_yticks(idx, labels=names, fontsize=font)
