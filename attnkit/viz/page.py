"""Self-contained HTML pages: one file, no network. The shared style and script (``static/``) and a
page's own script are inlined; the data goes in one ``<script type="application/json">`` block.

Arrays are stored compactly (``pack``): little-endian bytes, the bytes of each number split into planes
(all first bytes, then all second bytes: zeros group together), zlib-compressed, base64 text. Weights in
[0, 1] are rounded to 3 or 4 decimals and stored as 16-bit integers (MiniLM's 6 x 12 heads over 100
tokens at 3 decimals: about 0.5 MB); other numbers as exact float32. The page inflates them with the browser's own
``DecompressionStream`` (``static/common.js``: ``unpack``). Text is inserted as text, never as markup.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import zlib
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["pack", "unpack", "write_page", "read_page_data", "as_numpy"]

DATA_ID = "attnkit-data"
_FORMATS = {"u2": "<u2", "f4": "<f4"}


def as_numpy(x) -> np.ndarray:
    """A tensor or array-like as a float64 numpy array (tensors detached, on the CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().double().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def pack(x, *, decimals: int | None = None) -> dict:
    """An array as JSON-safe text. ``decimals=4``: values in [0, 1] rounded to 4 decimals, stored as
    uint16 k (the page reads ``k / 10^4``); otherwise exact float32."""
    a = as_numpy(x)
    if decimals is not None:
        if a.size and (a.min() < 0 or a.max() > 1):
            raise ValueError("pack: values must lie in [0, 1] to be stored with `decimals`")
        scale = 10 ** decimals
        raw, dtype = np.rint(a * scale).astype(_FORMATS["u2"]), "u2"
        meta = {"decimals": decimals}
    else:
        raw, dtype, meta = a.astype(_FORMATS["f4"]), "f4", {}
    planes = raw.reshape(-1).view(np.uint8).reshape(-1, raw.itemsize).T  # (itemsize, n): byte planes
    blob = base64.b64encode(zlib.compress(planes.tobytes(), 9)).decode("ascii")
    return {"shape": list(a.shape), "dtype": dtype, **meta, "z": blob}


def unpack(d: dict) -> np.ndarray:
    """The array stored by ``pack`` (float64; rounded values as the page shows them)."""
    dtype = np.dtype(_FORMATS[d["dtype"]])
    planes = np.frombuffer(zlib.decompress(base64.b64decode(d["z"])), dtype=np.uint8).reshape(dtype.itemsize, -1)
    a = planes.T.copy().view(dtype).astype(np.float64).reshape(d["shape"])
    return a / 10 ** d["decimals"] if "decimals" in d else a  # k / 10^n: the nearest double to the rounded value


def _static(name: str) -> str:
    return resources.files("attnkit.viz").joinpath("static", name).read_text(encoding="utf-8")


_SHELL = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>__TITLE__</title>
<style>
__STYLE__
</style></head><body>
__BODY__
<script type="application/json" id="__DATA_ID__">__DATA__</script>
<script>
"use strict";
__SCRIPT__
</script></body></html>
"""


def write_page(path: str | os.PathLike, *, title: str, body: str, scripts: list[str], data: dict,
               styles: tuple[str, ...] = ("page.css",)) -> Path:
    """Write a page atomically: ``body`` (trusted markup of the page's own), the static ``scripts``
    (file names under ``static/``, run in order after ``common.js``) and ``data`` (JSON; "<" escaped
    so no text can close the element). Returns the path."""
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    code = "\n".join(_static(s) for s in ("common.js", *scripts))
    fill = {"__TITLE__": html.escape(str(title), quote=False), "__STYLE__": "\n".join(_static(s) for s in styles),
            "__BODY__": body, "__DATA_ID__": DATA_ID, "__DATA__": blob, "__SCRIPT__": code}
    page = re.sub("__(?:TITLE|STYLE|BODY|DATA_ID|DATA|SCRIPT)__", lambda m: fill[m.group(0)], _SHELL)  # one pass
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_page_data(path: str | os.PathLike, *, what: str = "an attnkit page") -> dict:
    """The JSON data block of a page written by ``write_page`` (packed arrays left as stored)."""
    text = Path(path).read_text(encoding="utf-8")
    start_tag = f'<script type="application/json" id="{DATA_ID}">'
    start = text.find(start_tag)
    end = text.find("</script>", start)
    if start < 0 or end < 0:
        raise ValueError(f"{path} is not {what}")
    return json.loads(text[start + len(start_tag):end])
