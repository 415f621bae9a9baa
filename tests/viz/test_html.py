"""The interactive attention page: stored data, escaping, errors, and its script run under node."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

from attnkit.viz import attention_html, read_attention_html


def weights(n=2, h=3, lq=4, lk=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, h, lq, lk, generator=g).softmax(-1)  # (N, H, Lq, Lk), rows sum to 1


def test_page_stores_weights_and_labels(tmp_path):
    w = weights()
    path = attention_html(w, ["[CLS]", "i", "saw", "[SEP]"], tmp_path / "sub" / "a.html", title="t")
    assert path == tmp_path / "sub" / "a.html" and not list(path.parent.glob("*.tmp"))
    d = read_attention_html(path)
    assert d["title"] == "t" and d["queries"] == d["keys"] == ["[CLS]", "i", "saw", "[SEP]"]
    assert d["layer_names"] == ["layer 1", "layer 2"]
    got = np.array(d["weights"])
    assert got.shape == (2, 3, 4, 4) and np.abs(got - w.numpy()).max() <= 5e-5


def test_cross_attention_and_lower_ranks(tmp_path):
    w = weights(1, 2, 3, 5)[0]  # (H, Lq, Lk): a cross-attention with 3 queries and 5 keys
    d = read_attention_html(attention_html(w, list("abc"), tmp_path / "x.html", keys=list("vwxyz"),
                                           layer_names=["decoder 1"]))
    assert d["queries"] == ["a", "b", "c"] and d["keys"] == list("vwxyz") and d["layer_names"] == ["decoder 1"]
    assert np.array(d["weights"]).shape == (1, 2, 3, 5)
    d2 = read_attention_html(attention_html(w[0], list("abc"), tmp_path / "y.html", keys=list("vwxyz")))
    assert np.array(d2["weights"]).shape == (1, 1, 3, 5)


def test_text_cannot_break_out_of_the_page(tmp_path):
    nasty = ["</script><script>alert(1)</script>", "<b>&amp;", "__DATA__", "é ✓"]
    path = attention_html(weights(1, 1, 4, 4), nasty, tmp_path / "n.html", title="</title><i>__DATA_ID__")
    text = path.read_text(encoding="utf-8")
    assert text.count("</script>") == 2  # the data block's end and the code's end, nothing from the tokens
    assert "<title>&lt;/title&gt;&lt;i&gt;__DATA_ID__</title>" in text
    d = read_attention_html(path)
    assert d["queries"] == nasty and d["title"] == "</title><i>__DATA_ID__"


@pytest.mark.parametrize("bad, match", [
    (torch.rand(2, 2, 2, 2, 2), "must be"),
    (torch.rand(1, 1, 0, 3), "no empty dim"),
    (torch.full((1, 1, 2, 2), float("nan")), "NaN"),
])
def test_bad_weights(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        attention_html(bad, ["a", "b"], tmp_path / "b.html")


def test_label_counts_must_match(tmp_path):
    with pytest.raises(ValueError, match="3 query labels"):
        attention_html(weights(), ["a", "b", "c"], tmp_path / "b.html")
    with pytest.raises(ValueError, match="layer_names"):
        attention_html(weights(), list("abcd"), tmp_path / "b.html", layer_names=["only one"])
    assert not (tmp_path / "b.html").exists()


def test_not_a_page(tmp_path):
    (tmp_path / "p.html").write_text("<html></html>")
    with pytest.raises(ValueError, match="not a page written by attention_html"):
        read_attention_html(tmp_path / "p.html")


# A minimal DOM, enough for the page's script: elements keep their children, attributes and text.
DOM_SHIM = r"""
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.attrs = {}; this.style = {}; this._text = ""; }
  appendChild(c) { this.children.push(c); return c; }
  append(...cs) { for (const c of cs) this.children.push(typeof c === "string" ? {tag: "#text", textContent: c} : c); }
  replaceChildren() { this.children = []; }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  set textContent(v) { this._text = String(v); this.children = []; }
  get textContent() { return this._text; }
  createTHead() { return this.appendChild(new El("thead")); }
  createTBody() { return this.appendChild(new El("tbody")); }
  insertRow() { return this.appendChild(new El("tr")); }
  insertCell() { return this.appendChild(new El("td")); }
  all(tag) {
    const out = [];
    const walk = e => { for (const c of e.children || []) { if (c.tag === tag) out.push(c); walk(c); } };
    walk(this);
    return out;
  }
}
const byId = {};
for (const id of ["title", "layer", "heads", "all", "none", "lines", "matrix"]) byId[id] = new El(id);
const data = new El("script"); data.textContent = DATA; byId[DATA_ID] = data;
const inputs = [];
globalThis.document = {
  getElementById: id => byId[id],
  createElement: tag => { const e = new El(tag); if (tag === "input") inputs.push(e); return e; },
  createElementNS: (ns, tag) => new El(tag),
  querySelectorAll: () => inputs,
};
"""

REPORT = r"""
const report = () => ({
  lines: byId.lines.all("line").map(l => [Number(l.attrs.y1), Number(l.attrs.y2), Number(l.attrs["stroke-opacity"])]),
  texts: byId.lines.all("text").map(t => t.textContent),
  cells: byId.matrix.all("td").map(c => c.style.background),
  caption: byId.matrix.all("p").map(p => p.textContent),
  options: byId.layer.all("option").length,
});
const out = {first: report()};
byId.layer.onchange({target: {value: "1"}});          // layer 2
inputs[1].checked = false; inputs[1].onchange();       // untick head 2
out.second = report();
byId.none.onclick(); out.none = byId.matrix.textContent;
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_script_draws_every_line_and_cell(tmp_path):
    w = weights(2, 3, 4, 4, seed=1)
    w[0, 0, 0] = torch.tensor([0.996, 0.002, 0.001, 0.001])  # three weights below the 0.01 drawing floor
    path = attention_html(w, ["a", "b", "c", "d"], tmp_path / "p.html")
    text = path.read_text(encoding="utf-8")
    data = read_attention_html(path)
    script = re.findall(r"<script>(.*?)</script>", text, re.S)[0]
    program = (f"const DATA = {json.dumps(json.dumps(data))}; const DATA_ID = 'attnkit-attention';\n"
               + DOM_SHIM + script + REPORT)
    (tmp_path / "run.js").write_text(program, encoding="utf-8")
    res = subprocess.run(["node", str(tmp_path / "run.js")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    wr = np.array(data["weights"])
    first, second = out["first"], out["second"]
    assert first["options"] == 2 and first["texts"] == ["a", "b", "c", "d"] * 2
    # layer 1, all heads: one line per weight >= 0.01, as opaque as its weight
    assert len(first["lines"]) == int((wr[0] >= 0.01).sum()) == 3 * 16 - 3
    assert sorted(o for _, _, o in first["lines"]) == sorted(x for x in wr[0].ravel() if x >= 0.01)
    mean = wr[0].mean(0)  # the matrix shows the mean of the ticked heads
    assert len(first["cells"]) == 16 and first["caption"] == ["layer 1, mean of heads 1, 2, 3"]
    alphas = [float(re.search(r"([\d.e-]+)\)$", c).group(1)) for c in first["cells"]]
    assert np.allclose(alphas, mean.ravel(), atol=1e-9)
    # layer 2 with head 2 unticked: heads 1 and 3 only
    assert len(second["lines"]) == int((wr[1, [0, 2]] >= 0.01).sum())
    assert second["caption"] == ["layer 2, mean of heads 1, 3"]
    alphas = [float(re.search(r"([\d.e-]+)\)$", c).group(1)) for c in second["cells"]]
    assert np.allclose(alphas, wr[1, [0, 2]].mean(0).ravel(), atol=1e-9)
    assert out["none"] == "no head selected"
