"""An interactive attention page: one self-contained HTML file, no network, no JavaScript library.

``attention_html(weights, tokens, path)`` writes every layer's and head's weights (N, H, Lq, Lk) into
a page with two views of the layer chosen in a menu:

- lines (bertviz's "head view"): queries on the left, keys on the right, one colour per head, each
  line as opaque as its weight; pointing at a token keeps only its lines;
- a matrix: rows = queries, columns = keys, for one head or the mean of the heads ticked.

The weights are stored in the page as JSON (rounded to 4 decimals); tokens are inserted as text,
never as markup, so any text is safe to show.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["attention_html", "read_attention_html"]

_DATA_ID = "attnkit-attention"

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
.controls { margin: .6em 0 1em; display: flex; gap: 1.2em; flex-wrap: wrap; align-items: center; }
.heads label { margin-right: .5em; white-space: nowrap; }
.views { display: flex; gap: 3em; align-items: flex-start; flex-wrap: wrap; }
svg text { font: 13px ui-monospace, monospace; cursor: default; }
svg text.dim { fill: #bbb; }
table.m { border-collapse: collapse; font: 12px ui-monospace, monospace; }
table.m td { width: 1.9em; height: 1.9em; text-align: center; border: 1px solid #fff; }
table.m th { font-weight: normal; padding: 0 .4em; white-space: nowrap; }
table.m thead th { writing-mode: vertical-rl; transform: rotate(180deg); vertical-align: bottom; }
.note { color: #666; max-width: 60em; }
</style></head><body>
<h2 id="title"></h2>
<p class="note">Lines: queries on the left, keys on the right; each line's opacity is its attention
weight, one colour per head. Point at a token to see only its lines. Matrix: rows are queries,
columns are keys; each row sums to 1.</p>
<div class="controls">
  <label>Layer <select id="layer"></select></label>
  <span class="heads" id="heads"></span>
  <button id="all">all heads</button><button id="none">no heads</button>
</div>
<div class="views"><svg id="lines"></svg><div id="matrix"></div></div>
<script type="application/json" id="__DATA_ID__">__DATA__</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("__DATA_ID__").textContent);
const W = D.weights, Q = D.queries, K = D.keys, NL = W.length, NH = W[0].length;
const color = h => `hsl(${Math.round(360 * h / NH)}, 70%, 45%)`;
const $ = id => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
let layer = 0, focus = -1;
const on = new Array(NH).fill(true);
$("title").textContent = D.title;
D.layer_names.forEach((name, i) => {
  const o = document.createElement("option"); o.value = i; o.textContent = name; $("layer").appendChild(o);
});
$("layer").onchange = e => { layer = +e.target.value; draw(); };
for (let h = 0; h < NH; h++) {
  const l = document.createElement("label"), c = document.createElement("input");
  c.type = "checkbox"; c.checked = true; c.onchange = () => { on[h] = c.checked; draw(); };
  l.style.color = color(h); l.append(c, `head ${h + 1}`); $("heads").appendChild(l);
}
const setAll = v => { on.fill(v); document.querySelectorAll("#heads input").forEach(c => c.checked = v); draw(); };
$("all").onclick = () => setAll(true); $("none").onclick = () => setAll(false);
function el(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function draw() {
  const svg = $("lines"); svg.replaceChildren();
  const row = 26, left = 10 + 8 * Math.max(...Q.map(t => t.length)), gap = 220;
  const right = left + gap, n = Math.max(Q.length, K.length);
  svg.setAttribute("width", right + 20 + 8 * Math.max(...K.map(t => t.length)));
  svg.setAttribute("height", row * n + 10);
  for (let h = 0; h < NH; h++) {
    if (!on[h]) continue;
    for (let i = 0; i < Q.length; i++) {
      if (focus >= 0 && focus !== i) continue;
      for (let j = 0; j < K.length; j++) {
        const w = W[layer][h][i][j];
        if (w < 0.01) continue;
        svg.appendChild(el("line", { x1: left + 6, y1: row * i + 16, x2: right - 6, y2: row * j + 16,
          stroke: color(h), "stroke-width": 2, "stroke-opacity": w }));
      }
    }
  }
  Q.forEach((t, i) => {
    const e = el("text", { x: left, y: row * i + 20, "text-anchor": "end" }, t);
    if (focus >= 0 && focus !== i) e.setAttribute("class", "dim");
    e.onmouseenter = () => { focus = i; draw(); };
    e.onmouseleave = () => { focus = -1; draw(); };
    svg.appendChild(e);
  });
  K.forEach((t, j) => svg.appendChild(el("text", { x: right, y: row * j + 20 }, t)));
  matrix();
}
function matrix() {
  const heads = [...Array(NH).keys()].filter(h => on[h]), box = $("matrix");
  box.replaceChildren();
  if (!heads.length) { box.textContent = "no head selected"; return; }
  const cap = document.createElement("p");
  cap.textContent = heads.length === 1 ? `layer ${layer + 1}, head ${heads[0] + 1}`
    : `layer ${layer + 1}, mean of heads ${heads.map(h => h + 1).join(", ")}`;
  const t = document.createElement("table"); t.className = "m";
  const head = t.createTHead().insertRow(); head.appendChild(document.createElement("th"));
  K.forEach(k => { const th = document.createElement("th"); th.textContent = k; head.appendChild(th); });
  const body = t.createTBody();
  Q.forEach((q, i) => {
    const r = body.insertRow(), th = document.createElement("th"); th.textContent = q; r.appendChild(th);
    K.forEach((k, j) => {
      let w = 0; for (const h of heads) w += W[layer][h][i][j]; w /= heads.length;
      const c = r.insertCell(); c.title = `${q} -> ${k}: ${w.toFixed(3)}`;
      c.style.background = `rgba(30, 90, 200, ${w})`; c.style.color = w > 0.5 ? "#fff" : "#333";
      if (Q.length <= 16 && K.length <= 16) c.textContent = w.toFixed(2).replace(/^0/, "");
    });
  });
  box.append(cap, t);
}
draw();
</script></body></html>
"""


def _as_array(weights) -> np.ndarray:
    w = weights.detach().float().cpu().numpy() if hasattr(weights, "detach") else np.asarray(weights, dtype=np.float64)
    if w.ndim == 2:
        w = w[None, None]  # (Lq, Lk) -> (1, 1, Lq, Lk)
    elif w.ndim == 3:
        w = w[None]  # (H, Lq, Lk) -> (1, H, Lq, Lk)
    if w.ndim != 4 or 0 in w.shape:
        raise ValueError(f"attention_html: `weights` must be (layers, heads, Lq, Lk), (heads, Lq, Lk) or (Lq, Lk) "
                         f"with no empty dim, got shape {tuple(w.shape)}")
    if not np.isfinite(w).all():
        raise ValueError("attention_html: `weights` contains NaN or infinity")
    return w


def attention_html(weights, tokens: Sequence[str], path: str | os.PathLike, *,
                   keys: Sequence[str] | None = None, title: str = "attention",
                   layer_names: Sequence[str] | None = None) -> Path:
    """Write the page for ``weights`` (N, H, Lq, Lk) (or (H, Lq, Lk), or (Lq, Lk)) and return its path.

    ``tokens`` label the queries, ``keys`` the keys (default: the same tokens, for self-attention).
    ``layer_names`` (N) name the menu entries (default "layer 1" ...). Written atomically.
    """
    w = _as_array(weights)
    queries = [str(t) for t in tokens]
    keys = queries if keys is None else [str(t) for t in keys]
    n, h, lq, lk = w.shape
    if len(queries) != lq or len(keys) != lk:
        raise ValueError(f"attention_html: {len(queries)} query labels and {len(keys)} key labels for weights of "
                         f"shape {tuple(w.shape)} (Lq = {lq}, Lk = {lk})")
    names = [f"layer {i + 1}" for i in range(n)] if layer_names is None else [str(x) for x in layer_names]
    if len(names) != n:
        raise ValueError(f"attention_html: `layer_names` has {len(names)} names for {n} layers")
    data = {"title": str(title), "queries": queries, "keys": keys, "layer_names": names,
            "weights": np.round(w, 4).tolist()}
    # JSON inside <script>: escape "<" so no text can close the element (a token "</script>" stays text).
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    fill = {"__TITLE__": html.escape(str(title), quote=False), "__DATA_ID__": _DATA_ID, "__DATA__": blob}
    page = re.sub("__TITLE__|__DATA_ID__|__DATA__", lambda m: fill[m.group(0)], _PAGE)  # one pass: no text is re-read
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_attention_html(path: str | os.PathLike) -> dict:
    """The data stored in a page written by ``attention_html``: title, queries, keys, layer_names, weights."""
    text = Path(path).read_text(encoding="utf-8")
    start_tag = f'<script type="application/json" id="{_DATA_ID}">'
    start = text.find(start_tag)
    end = text.find("</script>", start)
    if start < 0 or end < 0:
        raise ValueError(f"read_attention_html: {path} is not a page written by attention_html")
    return json.loads(text[start + len(start_tag):end])
