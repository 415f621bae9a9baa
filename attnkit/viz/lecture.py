"""The lecture view: pick a layer, a head and a query token and follow the lecture's chain with the
model's own numbers.

    q^i, every k^j  ->  alpha_ij = q^i . k^j / sqrt(d)  ->  alpha'_ij = softmax_j(alpha_ij)
      ->  b^i = sum_j alpha'_ij v^j  ->  o^i = W^o [b^{i,1}; ...; b^{i,H}] + c

``lecture_html(layers, tokens, path)`` writes the page from ``LayerParts`` (per-head q, k, v and W^o,
see ``attnkit.viz.heads``); the page computes alpha, alpha' and b^i itself from the exact float32 q, k,
v (a browser test checks them against ``attnkit.explain`` to 3 decimals). ``model_lecture_html(model,
run, tokens, path)`` captures a real model's attention inputs while ``run()`` runs it once and writes
the page for every self-attention layer whose length matches ``tokens`` (``keys=``: every cross-attention
layer of a decoder, e.g. a translation's target tokens against its source).

Size: 3 x layers x heads x L x head size float32 numbers, plus layers x L x d_model for o^i, exact
(MiniLM: about 43 KB a token, 0.4 MB for 10 tokens, 1.8 MB for 43).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

from .heads import LayerParts, capture_attention, explain_layer, head_parts
from .html import _first_word
from .page import pack, read_page_data, unpack, write_page

__all__ = ["lecture_html", "model_lecture_html", "read_lecture_html"]

_BODY = """<h2 id="title"></h2>
<p class="note">The lecture's self-attention, one step at a time, with this model's numbers. Each token's
vector a^i (the layer's input) gives a query q^i = W^q a^i, a key k^i = W^k a^i and a value v^i = W^v a^i,
one set per head. Pick a layer, a head and a query token; every number below is computed in this
page from the stored q, k, v.</p>
<p class="note" id="notes"></p>
<div class="controls"><label>Layer <select id="layer"></select></label>
<label>Head <select id="head"></select></label></div>
<div>Query token: <span id="tokens"></span></div>
<h3 id="where"></h3>
<div class="step"><h3>1. The query against every key: \u03b1_ij = q^i \u00b7 k^j / \u221ad, then the softmax
over the keys: \u03b1'_ij = exp(\u03b1_ij) / \u03a3_j exp(\u03b1_ij)</h3>
<div id="qrow"></div><div id="scores-box"></div><div id="scores-legend"></div>
<h3>2. One score in full</h3><p class="lab" id="dot-title"></p><div id="dot-box"></div></div>
<div class="step"><h3>3. The values, weighted by \u03b1' and summed: b^i = \u03a3_j \u03b1'_ij v^j</h3>
<div id="values-box"></div></div>
<div class="step"><h3>4. Multi-head: W^o merges every head's b^i into the layer's output o^i</h3>
<p class="note">Click a head to follow its chain above.</p><div id="merge-box"></div></div>
"""


def lecture_html(layers: Sequence[LayerParts], tokens: Sequence[str], path: str | os.PathLike, *,
                 keys: Sequence[str] | None = None, title: str = "self-attention, step by step",
                 layer_names: Sequence[str] | None = None, notes: str = "", scale: float | None = None) -> Path:
    """Write the lecture page for ``layers`` (one ``LayerParts`` each, same heads and sizes) and return its path.

    ``tokens`` (Lq) label the queries, ``keys`` (Lk) the keys (default the tokens). ``scale``: the
    score scale (default 1/sqrt(head size)). ``notes``: a line about the model shown under the title.
    """
    if not layers:
        raise ValueError("lecture_html: `layers` is empty")
    shapes = {(p.q.shape, p.k.shape, p.v.shape, p.w_o.shape) for p in layers}
    if len(shapes) != 1:
        raise ValueError(f"lecture_html: every layer must have the same sizes, got {sorted(map(str, shapes))}")
    h, lq, dh = layers[0].q.shape
    lk = layers[0].k.shape[1]
    queries = [str(t) for t in tokens]
    keys = queries if keys is None else [str(t) for t in keys]
    if len(queries) != lq or len(keys) != lk:
        raise ValueError(f"lecture_html: {len(queries)} query labels and {len(keys)} key labels for "
                         f"q (H, Lq, dh) = {tuple(layers[0].q.shape)} and k = {tuple(layers[0].k.shape)}")
    names = [f"layer {i + 1}" for i in range(len(layers))] if layer_names is None else [str(x) for x in layer_names]
    if len(names) != len(layers):
        raise ValueError(f"lecture_html: `layer_names` has {len(names)} names for {len(layers)} layers")
    scale = dh ** -0.5 if scale is None else float(scale)
    merged, shares = zip(*((m, s) for _, m, s in (explain_layer(p, scale) for p in layers)))
    masks = [p.mask for p in layers]
    data = {
        "title": str(title), "notes": str(notes), "queries": queries, "keys": keys, "layer_names": names,
        "scale": scale, "pin": _first_word(queries), "bias": layers[0].b_o is not None,
        "q": pack(torch.stack([p.q for p in layers])),  # (N, H, Lq, dh)
        "k": pack(torch.stack([p.k for p in layers])),  # (N, H, Lk, dh)
        "v": pack(torch.stack([p.v for p in layers])),  # (N, H, Lk, dh)
        "o": pack(torch.stack(merged)),  # (N, Lq, d_out)
        "share": pack(torch.stack(shares)),  # (N, H, Lq)
        "masks": None if all(m is None for m in masks) else pack(torch.stack(
            [torch.ones(lq, lk) if m is None else m.float() for m in masks]), decimals=0),  # (N, Lq, Lk)
    }
    return write_page(path, title=title, body=_BODY, scripts=["lecture.js"], data=data)


def model_lecture_html(model: nn.Module, run: Callable[[], object], tokens: Sequence[str],
                       path: str | os.PathLike, *, keys: Sequence[str] | None = None,
                       title: str = "self-attention, step by step", notes: str = "", example: int = 0) -> Path:
    """The lecture page of a real model: ``run()`` runs ``model`` once on one input of len(tokens) tokens
    (batch row ``example``; the decoder on the whole target at once, no K/V cache). Every self-attention
    call over that many tokens becomes a layer of the page; with ``keys`` (a decoder's source tokens),
    every cross-attention call from len(tokens) queries to len(keys) keys instead."""
    calls = capture_attention(model, run)
    n, m = len(tokens), len(tokens) if keys is None else len(keys)
    cross = keys is not None
    chosen = [c for c in calls if (c.key is not c.query) == cross and c.query.shape[1] == n and c.key.shape[1] == m]
    if not chosen:
        kind = f"cross-attention call from {n} queries to {m} keys" if cross else f"self-attention call over {n} tokens"
        raise ValueError(f"model_lecture_html: no {kind} while running the model "
                         f"(calls seen: {[(tuple(c.query.shape), tuple(c.key.shape)) for c in calls]})")
    parts = [head_parts(c, example) for c in chosen]
    positions = {type(c.module.position).__name__ for c in chosen if c.module.position is not None}
    if positions and not notes:  # only rotations get this far (head_parts refuses positions that add a bias)
        named = ", ".join(sorted("rotary position (RoPE)" if p == "Rotary" else p for p in positions))
        notes = f"q and k are shown as the scores see them: after the {named} rotation."
    if cross and not notes:
        notes = ("Cross-attention: the queries come from the decoder (q^i = W^q times the decoder's vector at target "
                 "position i, labelled with the piece that position produces), the keys and values from the "
                 "encoder's output (k^j = W^k h^j, v^j = W^v h^j for source piece j).")
    names = [f"{'cross-attention ' if cross else ''}layer {i + 1}" for i in range(len(parts))]
    return lecture_html(parts, tokens, path, keys=keys, title=title, notes=notes, layer_names=names)


def read_lecture_html(path: str | os.PathLike) -> dict:
    """The data of a page written by ``lecture_html`` (arrays unpacked)."""
    d = read_page_data(path, what="a page written by lecture_html")
    if "q" not in d or "share" not in d:
        raise ValueError(f"{path} is not a page written by lecture_html")
    for k in ("q", "k", "v", "o", "share", "masks"):
        if d.get(k) is not None:
            d[k] = unpack(d[k])
    return d
