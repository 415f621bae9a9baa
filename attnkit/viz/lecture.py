"""The lecture view: pick a layer, a head and a query token and follow the lecture's chain with the
model's own numbers.

    q^i, every k^j  ->  alpha_ij = q^i . k^j / sqrt(d)  ->  alpha'_ij = softmax_j(alpha_ij)
      ->  b^i = sum_j alpha'_ij v^j  ->  o^i = W^o [b^{i,1}; ...; b^{i,H}] + c

``lecture_html(layers, tokens, path)`` writes the page from ``LayerParts`` (per-head q, k, v and W^o,
see ``attnkit.viz.heads``); the page computes alpha, alpha' and b^i itself from the exact float32 q, k,
v (a browser test checks them against ``attnkit.explain`` to 3 decimals). Below the chain of one query,
the lecture's matrices for every query at once, one column per token (Q, K, V, A = K^T Q, A', O; with
``matrices=`` also I and W^q, W^k, W^v, so Q = W^q I can be checked by hand). A masked key (a decoder's
future token) is shown as masked, its alpha' = 0. ``model_lecture_html(model,
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

import numpy as np
import torch
from torch import nn

from .heads import LayerParts, capture_attention, explain_layer, head_parts
from .html import _first_word
from .page import pack, read_page_data, unpack, write_page

__all__ = ["lecture_html", "model_lecture_html", "read_lecture_html"]

_BODY = """<h2 id="title"></h2>
<p class="note">The lecture's self-attention, one step at a time, with this model's numbers. Each token's
vector a^i (the layer's input) gives a query q^i = W^q a^i, a key k^i = W^k a^i and a value v^i = W^v a^i,
one set per head. Pick __A_LAYER__, a head and a query token; every number below is computed in this
page from the stored q, k, v. Tokens are numbered as the lecture numbers a^1, a^2, ...: q^9 is token 9.</p>
<p class="note" id="notes"></p>
<div class="controls"><label>__LAYER_CAP__ <select id="layer"></select></label>
<label>Head <select id="head"></select></label></div>
<div>Query token: <span id="tokens"></span></div>
<h3 id="where"></h3>
<div class="step"><h3 id="step1"></h3>
<div id="qrow"></div><div id="scores-box"></div><p class="note" id="masked-note"></p><div id="scores-legend"></div>
<h3>2. One score in full</h3><p class="lab" id="dot-title"></p><div id="dot-box"></div></div>
<div class="step"><h3>3. The values, weighted by \u03b1' and summed: b^i = \u03a3_j \u03b1'_ij v^j</h3>
<div id="values-box"></div></div>
<div class="step"><h3 id="step4"></h3>
<p class="note" id="merge-note"></p><div id="merge-box"></div></div>
<div class="step" id="matrices"><h3>5. Every query at once: the lecture's matrices (one column per token)</h3>
<p class="note">As in the lecture, a token's vectors are columns: I = [a^1 a^2 \u2026], Q = W^q I, K = W^k I,
V = W^v I, A = K^T Q (row j: key k^j, column i: query q^i), A' = the softmax of each column of A (each column
sums to 1), O = V A' (column i is b^i). The chosen query's column is marked; click a column to choose it.</p>
<div id="matrices-box"></div></div>
"""
MATRICES_IN_FULL = 64  # inputs a^i and W^q, W^k, W^v are stored when no size of theirs is larger


def _scales(scale, layers) -> list[float]:
    """Each layer's score scale: ``scale`` None -> 1/sqrt(head size); a number -> for every layer; a list -> one
    per layer (None in it: 1/sqrt(head size))."""
    given = list(scale) if isinstance(scale, (list, tuple)) else [scale] * len(layers)
    if len(given) != len(layers):
        raise ValueError(f"lecture_html: `scale` has {len(given)} entries for {len(layers)} layers")
    return [p.q.shape[2] ** -0.5 if s is None else float(s) for s, p in zip(given, layers)]


def _matrices(m: dict | None, p: LayerParts, n: int) -> dict:
    """The layer's inputs a^i (L, d_in) and per-head W^q, W^k (H, dh, d_in), W^v (H, dv, d_in), checked against
    its q, k, v; nothing when a size is past ``MATRICES_IN_FULL``."""
    if m is None:
        return {}
    a = m["a"].float()
    ws = [m[name].float() for name in ("w_q", "w_k", "w_v")]
    if p.k.shape[1] != a.shape[0] or any(w.dim() != 3 or w.shape[-1] != a.shape[1] for w in ws):
        raise ValueError(f"lecture_html: layer {n + 1}'s matrices: a {tuple(a.shape)} and W^q, W^k, W^v "
                         f"{[tuple(w.shape) for w in ws]} do not fit its q, k (self-attention only)")
    if max(*a.shape, *(x for w in ws for x in w.shape[1:])) > MATRICES_IN_FULL:
        return {}
    for w, x, name in zip(ws, (p.q, p.k, p.v), "qkv"):
        got = torch.einsum("hdi,li->hld", w, a)  # (H, L, d): W a^i for every head and token
        if got.shape != x.shape or not torch.allclose(got, x.float(), atol=1e-4):
            raise ValueError(f"lecture_html: layer {n + 1}: W^{name} a^i is not its {name} (shapes {tuple(got.shape)} "
                             f"and {tuple(x.shape)})")
    packed = {f"w{name}": pack(w) for w, name in zip(ws, "qkv")}  # (H, d, d_in) each
    return {"a": pack(a), **packed, "wo": None if p.w_o is None else pack(p.w_o)}


def lecture_html(layers: Sequence[LayerParts], tokens: Sequence[str], path: str | os.PathLike, *,
                 keys: Sequence[str] | None = None, title: str = "self-attention, step by step",
                 layer_names: Sequence[str] | None = None, notes: str = "",
                 scale: float | Sequence[float | None] | None = None,
                 matrices: Sequence[dict | None] | None = None, layer_word: str = "layer") -> Path:
    """Write the lecture page for ``layers`` (one ``LayerParts`` each: same tokens; heads and sizes may differ,
    ``w_o`` None for a layer without W^o) and return its path.

    ``tokens`` (Lq) label the queries, ``keys`` (Lk) the keys (default the tokens); the page tells repeated
    labels apart by position. ``scale``: the score scale, one for all or one per layer (default 1/sqrt(head
    size); 1 = the lecture's unscaled A = K^T Q). ``notes``: a line about the model under the title.
    ``matrices`` (one per layer, or None): ``{"a": (L, d_in), "w_q", "w_k", "w_v": (H, d, d_in)}``, the inputs
    and weights shown in full (sizes up to ``MATRICES_IN_FULL``) so Q = W^q I can be checked by hand.
    ``layer_word``: what the menu calls a layer ("example" for ``attnkit lecture``).
    """
    if not layers:
        raise ValueError("lecture_html: `layers` is empty")
    lq, lk = layers[0].q.shape[1], layers[0].k.shape[1]
    for n, p in enumerate(layers):
        h, lq_n, dh = p.q.shape
        if (lq_n, p.k.shape[1]) != (lq, lk) or p.k.shape != (h, lk, dh) or p.v.shape[:2] != (h, lk):
            raise ValueError(f"lecture_html: every layer must have the same tokens and, within a layer, matching "
                             f"q, k, v; layer {n + 1} has q {tuple(p.q.shape)}, k {tuple(p.k.shape)}, "
                             f"v {tuple(p.v.shape)} (first layer: Lq = {lq}, Lk = {lk})")
    queries = [str(t) for t in tokens]
    keys = queries if keys is None else [str(t) for t in keys]
    if len(queries) != lq or len(keys) != lk:
        raise ValueError(f"lecture_html: {len(queries)} query labels and {len(keys)} key labels for "
                         f"q (H, Lq, dh) = {tuple(layers[0].q.shape)} and k = {tuple(layers[0].k.shape)}")
    names = ([f"{layer_word} {i + 1}" for i in range(len(layers))] if layer_names is None
             else [str(x) for x in layer_names])
    if len(names) != len(layers):
        raise ValueError(f"lecture_html: `layer_names` has {len(names)} names for {len(layers)} layers")
    mats = [None] * len(layers) if matrices is None else list(matrices)
    if len(mats) != len(layers):
        raise ValueError(f"lecture_html: `matrices` has {len(mats)} entries for {len(layers)} layers")
    data_layers = []
    for n, (p, s, m) in enumerate(zip(layers, _scales(scale, layers), mats)):
        _, merged, share = explain_layer(p, s)
        data_layers.append({
            "scale": s, "merge": p.w_o is not None, "bias": p.b_o is not None,
            "q": pack(p.q), "k": pack(p.k), "v": pack(p.v),  # (H, Lq, dh), (H, Lk, dh), (H, Lk, dv)
            "o": pack(merged), "share": pack(share),  # (Lq, d_out), (H, Lq)
            "mask": None if p.mask is None else pack(p.mask.float(), decimals=0),  # (Lq, Lk), 1 = may attend
            **_matrices(m, p, n)})
    data = {"title": str(title), "notes": str(notes), "queries": queries, "keys": keys, "layer_names": names,
            "pin": _first_word(queries), "layers": data_layers}
    article = "an" if layer_word[:1].lower() in "aeiou" else "a"  # "an example", "a layer"
    body = (_BODY.replace("__LAYER_CAP__", layer_word.capitalize())
            .replace("__A_LAYER__", f"{article} {layer_word}").replace("__LAYER__", layer_word))
    return write_page(path, title=title, body=body, scripts=["lecture_matrices.js", "lecture.js"], data=data)


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
    """The data of a page written by ``lecture_html``: ``layers`` (each with its arrays unpacked: q, k, v, o,
    share, mask, a, wq, wk, wv, wo, and its scale) and, when every layer has the same sizes and scale, the arrays
    stacked over the layers as ``q`` (N, H, Lq, dh), ``k``, ``v``, ``o``, ``share``, ``masks`` and ``scale``."""
    d = read_page_data(path, what="a page written by lecture_html")
    if "layers" not in d or "queries" not in d:
        raise ValueError(f"{path} is not a page written by lecture_html")
    for layer in d["layers"]:
        for k in ("q", "k", "v", "o", "share", "mask", "a", "wq", "wk", "wv", "wo"):
            if layer.get(k) is not None:
                layer[k] = unpack(layer[k])
    first = d["layers"][0]
    same = all(x[k].shape == first[k].shape for x in d["layers"] for k in ("q", "k", "v", "o", "share"))
    if same and len({x["scale"] for x in d["layers"]}) == 1:
        for k in ("q", "k", "v", "o", "share"):
            d[k] = np.stack([x[k] for x in d["layers"]])
        masks = [x.get("mask") for x in d["layers"]]
        d["masks"] = None if all(m is None for m in masks) else np.stack(
            [np.ones(first["q"].shape[1:2] + first["k"].shape[1:2]) if m is None else m for m in masks])
        d["scale"] = first["scale"]
    return d
