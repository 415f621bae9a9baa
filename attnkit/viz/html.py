"""The interactive attention page: one self-contained HTML file (no network, no JavaScript library).

``attention_html(weights, tokens, path)`` writes every layer's and head's weights (N, H, Lq, Lk) into
one page with three views:

- the model view: every layer x head as a small matrix thumbnail, on one absolute scale (0 to 1) by
  default so heads compare (a menu scales each to its own largest weight instead); a click opens it in
  the head view;
- the head view (bertviz's): queries on one side, keys on the other, one colour per head, each line
  as opaque as its weight; pointing at a query or a key keeps only its lines (past 32 tokens lines are
  drawn for one token at a time);
- the matrix: rows = queries, columns = keys, for one head or the mean of the heads ticked, with a
  colour legend (the same scale as the thumbnails) and a zoom; it scrolls with its labels for long inputs.

Labels that repeat are told apart by position (``labels.tell_apart``: "saw@2", "saw@4"), in the page's
script; the data keeps the labels as given.

``cross_attention_html(weights, src_tokens, tgt_tokens, path)`` is the same page for a decoder's
cross-attention (layers, heads, T, S): source on the left, target on the right, the alignment matrix
with one row per target token. Weights are stored rounded to 4 decimals, or 3 past 200,000 weights
(``page.pack``: MiniLM over 100 tokens, about 0.5 MB).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .page import as_numpy, pack, read_page_data, unpack, write_page

__all__ = ["attention_html", "cross_attention_html", "read_attention_html"]

_BODY = """<h2 id="title"></h2>
<section id="model-view">
<h3>Model view: every layer and head</h3>
<p class="note">Rows are layers, columns are heads; each thumbnail is one head's attention matrix
(rows = __QS__, columns = __KS__). Click one to open it in the head view below. The colour scale is
linear and absolute (0 to 1, the same for every head) so heads can be compared: a near-uniform head stays pale. Scaled
to each head's own largest weight, every head looks saturated, however flat.</p>
<div class="controls"><label>Colour scale (thumbnails and matrix) <select id="scale">
<option value="absolute">0 to 1: the same for every head</option>
<option value="own">0 to each head's own largest weight</option></select></label></div>
<div class="thumbs" id="thumbs"></div><div id="thumbs-legend"></div>
</section>
<section id="head-view">
<h3>Head view</h3>
<p class="note">Lines join each __Q__ to the __KS__ it attends to; a line's opacity is its attention
weight, one colour per head. Point at a token to see only its lines; click it to keep them. The matrix
shows the same weights: rows are __QS__, columns are __KS__, each row sums to 1 (as attnkit.attention returns
them; the lecture pages lay A' out as the lecture writes it, a column per query, and name each axis too).</p>
<p class="note" id="lines-note"></p>
<div class="controls">
  <label>Layer <select id="layer"></select></label>
  <span class="heads" id="heads"></span>
  <button id="all">all heads</button><button id="none">no heads</button>
  <label>Matrix zoom <input type="range" id="zoom" min="6" max="36" step="1"></label>
</div>
<div class="views"><div class="lines-box"><svg id="lines-head"></svg><div class="scroll"><svg id="lines"></svg></div>
</div><div id="matrix"></div></div>
</section>
"""


def _weights(weights, name: str) -> np.ndarray:
    """(N, H, Lq, Lk), (H, Lq, Lk) or (Lq, Lk) -> (N, H, Lq, Lk), finite, no empty dim, in [0, 1]."""
    w = as_numpy(weights)
    if w.ndim == 2:
        w = w[None, None]  # (Lq, Lk) -> (1, 1, Lq, Lk)
    elif w.ndim == 3:
        w = w[None]  # (H, Lq, Lk) -> (1, H, Lq, Lk)
    if w.ndim != 4 or 0 in w.shape:
        raise ValueError(f"{name}: `weights` must be (layers, heads, Lq, Lk), (heads, Lq, Lk) or (Lq, Lk) "
                         f"with no empty dim, got shape {tuple(w.shape)}")
    if not np.isfinite(w).all():
        raise ValueError(f"{name}: `weights` contains NaN or infinity")
    if w.min() < -1e-6 or w.max() > 1 + 1e-6:
        raise ValueError(f"{name}: `weights` must lie in [0, 1] (attention weights), got "
                         f"{w.min():.3g} to {w.max():.3g}")
    return w.clip(0.0, 1.0)


SMALL = 200_000  # weights stored with 4 decimals up to this many, with 3 above (pages stay small)
SPECIAL = frozenset({"[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<pad>", "<bos>", "<eos>", "<unk>"})


def is_special(token: str) -> bool:
    """A tokenizer's marker token ([CLS], </s>, ...), also as labelled by the CLI ("[CLS]@0")."""
    return token.rsplit("@", 1)[0] in SPECIAL


def _first_word(tokens: list[str]) -> int:
    return next((i for i, t in enumerate(tokens) if not is_special(t)), 0)


def _page(w: np.ndarray, queries: list[str], keys: list[str], path, *, title: str, names: list[str] | None,
          sides: tuple[str, str], left: str, name: str) -> Path:
    n, _, lq, lk = w.shape
    if len(queries) != lq or len(keys) != lk:
        raise ValueError(f"{name}: {len(queries)} query labels and {len(keys)} key labels for weights of "
                         f"shape {tuple(w.shape)} (Lq = {lq}, Lk = {lk})")
    names = [f"layer {i + 1}" for i in range(n)] if names is None else [str(x) for x in names]
    if len(names) != n:
        raise ValueError(f"{name}: `layer_names` has {len(names)} names for {n} layers")
    data = {"title": str(title), "queries": queries, "keys": keys, "layer_names": names, "sides": list(sides),
            "left": left, "pin": _first_word(queries), "weights": pack(w, decimals=4 if w.size <= SMALL else 3)}
    return write_page(path, title=title, body=attention_body(sides), scripts=SCRIPTS, data=data)


SCRIPTS = ["matrix.js", "attention.js", "attention_page.js"]


def attention_body(sides: tuple[str, str] = ("query", "key")) -> str:
    """The attention view's markup (model view, head view, matrix), its notes naming the two sides."""
    plural = {"query": "queries", "key": "keys"}
    body = _BODY
    marks = (("__QS__", plural.get(sides[0], sides[0] + "s")), ("__KS__", plural.get(sides[1], sides[1] + "s")),
             ("__Q__", sides[0]), ("__K__", sides[1]))
    for mark, word in marks:
        body = body.replace(mark, word)
    return body


def attention_html(weights, tokens: Sequence[str], path: str | os.PathLike, *,
                   keys: Sequence[str] | None = None, title: str = "attention",
                   layer_names: Sequence[str] | None = None) -> Path:
    """Write the page for ``weights`` (N, H, Lq, Lk) (or (H, Lq, Lk), or (Lq, Lk)) and return its path.

    ``tokens`` label the queries, ``keys`` the keys (default: the same tokens, for self-attention).
    ``layer_names`` (N) name the layers (default "layer 1" ...). Written atomically.
    """
    w = _weights(weights, "attention_html")
    queries = [str(t) for t in tokens]
    keys = queries if keys is None else [str(t) for t in keys]
    return _page(w, queries, keys, path, title=title, names=layer_names, sides=("query", "key"),
                 left="queries", name="attention_html")


def cross_attention_html(weights, src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                         path: str | os.PathLike, *, title: str = "cross-attention",
                         layer_names: Sequence[str] | None = None) -> Path:
    """A decoder's cross-attention page: ``weights`` (layers, heads, T, S) of one translation,
    ``src_tokens`` (S) the source, ``tgt_tokens`` (T) the target. Lines run from the source (left) to
    the target (right); the alignment matrix has a row per target token and a column per source token.
    """
    w = _weights(weights, "cross_attention_html")
    names = [f"decoder layer {i + 1}" for i in range(w.shape[0])] if layer_names is None else layer_names
    return _page(w, [str(t) for t in tgt_tokens], [str(t) for t in src_tokens], path, title=title, names=names,
                 sides=("target token", "source token"), left="keys", name="cross_attention_html")


def read_attention_html(path: str | os.PathLike) -> dict:
    """The data stored in a page written by ``attention_html`` or ``cross_attention_html``: title, queries,
    keys, layer_names, sides and weights (N, H, Lq, Lk) as the page shows them (rounded)."""
    d = read_page_data(path, what="a page written by attention_html")
    if "weights" not in d or "queries" not in d:
        raise ValueError(f"{path} is not a page written by attention_html")
    d["weights"] = unpack(d["weights"])
    return d
