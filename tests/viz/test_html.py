"""The attention page (model view, head view, matrix) and the cross-attention page: stored data,
escaping, errors, size, and what a real browser draws when the controls are used."""

import numpy as np
import pytest
import torch

from attnkit.viz import attention_html, cross_attention_html, read_attention_html


def weights(n=2, h=3, lq=4, lk=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (2 * torch.randn(n, h, lq, lk, generator=g)).softmax(-1)  # (N, H, Lq, Lk), rows sum to 1


def test_page_stores_weights_and_labels(tmp_path):
    w = weights()
    path = attention_html(w, ["[CLS]", "i", "saw", "[SEP]"], tmp_path / "sub" / "a.html", title="t")
    assert path == tmp_path / "sub" / "a.html" and not list(path.parent.glob("*.tmp"))
    d = read_attention_html(path)
    assert d["title"] == "t" and d["queries"] == d["keys"] == ["[CLS]", "i", "saw", "[SEP]"]
    assert d["layer_names"] == ["layer 1", "layer 2"] and d["pin"] == 1  # the first word, not [CLS]
    assert d["weights"].shape == (2, 3, 4, 4) and np.abs(d["weights"] - w.numpy()).max() <= 5e-5


def test_cross_attention_and_lower_ranks(tmp_path):
    w = weights(1, 2, 3, 5)[0]  # (H, Lq, Lk): a cross-attention with 3 queries and 5 keys
    d = read_attention_html(attention_html(w, list("abc"), tmp_path / "x.html", keys=list("vwxyz"),
                                           layer_names=["decoder 1"]))
    assert d["queries"] == ["a", "b", "c"] and d["keys"] == list("vwxyz") and d["layer_names"] == ["decoder 1"]
    assert d["weights"].shape == (1, 2, 3, 5)
    d2 = read_attention_html(attention_html(w[0], list("abc"), tmp_path / "y.html", keys=list("vwxyz")))
    assert d2["weights"].shape == (1, 1, 3, 5)


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
    (torch.full((1, 1, 2, 2), 3.0), r"\[0, 1\]"),
])
def test_bad_weights(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        attention_html(bad, ["a", "b"], tmp_path / "b.html")


def test_label_counts_must_match(tmp_path):
    with pytest.raises(ValueError, match="3 query labels"):
        attention_html(weights(), ["a", "b", "c"], tmp_path / "b.html")
    with pytest.raises(ValueError, match="layer_names"):
        attention_html(weights(), list("abcd"), tmp_path / "b.html", layer_names=["only one"])
    with pytest.raises(ValueError, match="2 query labels and 4 key labels"):
        cross_attention_html(weights(1, 1, 3, 4), list("wxyz"), list("ab"), tmp_path / "b.html")
    assert not (tmp_path / "b.html").exists()


def test_not_a_page(tmp_path):
    (tmp_path / "p.html").write_text("<html></html>")
    with pytest.raises(ValueError, match="not a page written by attention_html"):
        read_attention_html(tmp_path / "p.html")


def test_hundred_tokens_of_minilm_stay_under_a_megabyte(tmp_path, minilm):
    text = " ".join(["the cat sat on the mat while the dog watched from the porch"] * 8)
    res = minilm.attend(text)
    assert len(res.tokens) >= 98
    path = attention_html(res.attentions, res.tokens, tmp_path / "long.html")
    assert path.stat().st_size < 700_000, path.stat().st_size
    stored = read_attention_html(path)["weights"]
    assert np.abs(stored - res.attentions.numpy()).max() <= 5e-4  # 3 decimals past 200,000 weights


# ---- in a real browser ---------------------------------------------------------------------------

LINES = "[...document.querySelectorAll('#lines line')].map(l => [+l.dataset.q, +l.dataset.k, +l.dataset.h, " \
        "+l.getAttribute('stroke-opacity')])"
CELLS = "[...document.querySelectorAll('#matrix td')].map(c => +c.dataset.w)"
CAPTION = "document.querySelector('#matrix .caption').textContent"
CHECKED = "[...document.querySelectorAll('#heads input')].map(c => c.checked)"


def test_model_view_head_view_and_matrix_in_chromium(tmp_path, open_page):
    w = weights(2, 3, 5, 5, seed=3)
    tokens = ["[CLS]", "time", "flies", "fast", "[SEP]"]
    page = open_page(attention_html(w, tokens, tmp_path / "a.html", title="flies"))
    wr = read_attention_html(tmp_path / "a.html")["weights"]  # what the page holds (4 decimals)
    assert page.eval("document.querySelectorAll('#thumbs canvas').length") == 6
    assert page.eval("document.querySelectorAll('.legend').length") == 2  # thumbnails and matrix
    # at first: layer 1, every head; the matrix is their mean
    assert page.eval(CAPTION) == "layer 1, mean of heads 1, 2, 3"
    assert np.allclose(page.eval(CELLS), wr[0].mean(0).ravel(), atol=1e-12)
    lines = page.eval(LINES)
    assert len(lines) == int((wr[0] >= 0.01).sum())
    assert all(abs(o - wr[0, h, q, k]) < 1e-12 for q, k, h, o in lines)
    # a click on the thumbnail of layer 2, head 3 opens it in the head view
    page.click("#thumbs canvas[data-layer='1'][data-head='2']")
    assert page.eval("document.getElementById('layer').value") == "1"
    assert page.eval(CHECKED) == [False, False, True]
    assert page.eval(CAPTION) == "layer 2, head 3"
    assert np.allclose(page.eval(CELLS), wr[1, 2].ravel(), atol=1e-12)
    assert {h for _, _, h, _ in page.eval(LINES)} == {2}
    assert page.eval("document.querySelectorAll('#thumbs canvas.sel').length") == 1
    # pointing at a key keeps only the lines into it; at a query, only its lines
    page.hover("#lines text[data-kind='k'][data-index='2']")
    assert {k for _, k, _, _ in page.eval(LINES)} == {2}
    page.hover("#lines text[data-kind='q'][data-index='3']")
    got = page.eval(LINES)
    assert {q for q, _, _, _ in got} == {3} and len(got) == int((wr[1, 2, 3] >= 0.01).sum())
    # the layer menu and the head boxes
    page.select("#layer", 0)
    page.click("#heads input[data-head='0']")
    assert page.eval(CHECKED) == [True, False, True] and page.eval(CAPTION) == "layer 1, mean of heads 1, 3"
    assert np.allclose(page.eval(CELLS), wr[0, [0, 2]].mean(0).ravel(), atol=1e-12)
    page.click("#none")
    assert page.eval(CAPTION) == "no head selected" and page.eval(LINES) == []
    # labels are dark on white: no token or head name in a light (e.g. yellow) colour
    colours = page.eval("[...document.querySelectorAll('#lines text, #heads label, #matrix th')]"
                        ".map(e => getComputedStyle(e).color === 'rgba(0, 0, 0, 0)' ? getComputedStyle(e).fill "
                        ": getComputedStyle(e).color)")
    for c in colours:
        r, g, b = (int(x) for x in c[c.index("(") + 1:c.index(")")].split(",")[:3])
        assert 0.2126 * r + 0.7152 * g + 0.0722 * b < 140, c  # dark enough to read on white


def test_long_input_draws_one_token_at_a_time_and_the_matrix_zooms(tmp_path, open_page):
    w = weights(1, 2, 60, 60, seed=5)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(58)] + ["[SEP]"]
    page = open_page(attention_html(w, tokens, tmp_path / "long.html"))
    assert "60 tokens: lines are drawn for one token at a time" in page.eval("document.body.textContent")
    assert {q for q, _, _, _ in page.eval(LINES)} == {1}  # pinned: the first word
    page.hover("#lines text[data-kind='q'][data-index='40']")
    assert {q for q, _, _, _ in page.eval(LINES)} == {40}
    page.click("#lines text[data-kind='k'][data-index='7']")  # pin a key
    page.hover("#title")
    assert {k for _, k, _, _ in page.eval(LINES)} == {7}
    assert page.eval("document.querySelectorAll('#matrix tbody tr').length") == 60
    before = page.eval("document.querySelector('#matrix td').getBoundingClientRect().width")
    page.eval("(() => { const z = document.getElementById('zoom'); z.value = 30; "
              "z.dispatchEvent(new Event('input')); })()")
    after = page.eval("document.querySelector('#matrix td').getBoundingClientRect().width")
    assert after > before and abs(after - 30) < 2
    assert page.eval("(() => { const s = document.querySelector('#matrix .scroll'); "
                     "return s.scrollHeight > s.clientHeight && s.scrollWidth > s.clientWidth; })()")


def test_cross_attention_page_puts_the_source_left(tmp_path, open_page):
    g = torch.Generator().manual_seed(2)
    w = torch.randn(2, 2, 3, 4, generator=g).softmax(-1)  # (layers, heads, T, S)
    src, tgt = ["ein", "Hund", "bellt", "</s>"], ["a", "dog", "barks"]
    path = cross_attention_html(w, src, tgt, tmp_path / "cross.html", title="de-en")
    d = read_attention_html(path)
    assert d["queries"] == tgt and d["keys"] == src and d["layer_names"] == ["decoder layer 1", "decoder layer 2"]
    page = open_page(path)
    left = page.eval("[...document.querySelectorAll('#lines-head text[text-anchor=end], #lines text[text-anchor=end]')]"
                     ".map(t => t.textContent)")
    assert left == ["source token", *src]  # the side's name above the scrolling lines, then the tokens
    rows = page.eval("[...document.querySelectorAll('#matrix tbody th')].map(t => t.textContent)")
    assert rows == tgt
    # every line starts at its source token on the left and ends at its target token on the right
    ys = page.eval("[...document.querySelectorAll('#lines line')].map(l => [+l.dataset.q, +l.dataset.k, "
                   "+l.getAttribute('y1'), +l.getAttribute('y2')])")
    assert ys and all(y1 < y2 for q, k, y1, y2 in ys if k < q) and all(y1 > y2 for q, k, y1, y2 in ys if k > q)


def test_thumbnails_stay_small_for_long_inputs(tmp_path, open_page):
    page = open_page(attention_html(weights(1, 2, 200, 150), [f"q{i}" for i in range(200)], tmp_path / "t.html",
                                    keys=[f"k{j}" for j in range(150)]))
    sizes = page.eval("[...document.querySelectorAll('#thumbs canvas')].map(c => [c.width, c.height, "
                      "c.getBoundingClientRect().width, c.getBoundingClientRect().height])")
    assert all(w == 150 and h == 200 and 50 <= bw <= 80 and 70 <= bh <= 80 for w, h, bw, bh in sizes), sizes


def test_model_view_scale_is_absolute_by_default_and_repeated_words_are_told_apart(tmp_path, open_page):
    """A near-uniform head (weights 0.11-0.20) stays pale on the default 0-1 scale; scaled to its own maximum it
    would look saturated. The menu switches thumbnails and matrix together; "saw" twice reads saw@2, saw@4."""
    flat = torch.full((1, 2, 4, 4), 0.25)
    flat[0, 0] = torch.tensor([[0.2, 0.3, 0.25, 0.25]] * 4)  # head 1: near uniform
    flat[0, 1] = torch.eye(4)  # head 2: each token on itself
    tokens = ["I", "saw", "a", "saw"]
    page = open_page(attention_html(flat, tokens, tmp_path / "s.html"))
    pixel = ("(h => { const c = document.querySelector(`#thumbs canvas[data-head='${h}']`); "
             "return [...c.getContext('2d').getImageData(1, 1, 1, 1).data].slice(0, 3); })")
    assert page.eval("document.getElementById('scale').value") == "absolute"
    pale, dark = page.eval(pixel + "(0)"), page.eval(pixel + "(1)")
    assert pale[0] > 100 and dark[0] < 60  # 0.3 of 1 is light blue; a weight of 1 is dark blue
    assert page.eval("document.getElementById('thumbs-legend').textContent").endswith("1")
    assert page.eval("document.querySelector('#matrix .legend').textContent").endswith("1")
    page.select("#scale", "own")
    assert page.eval(pixel + "(0)")[0] < 60  # 0.3 as its own largest weight: saturated, as the issue described
    assert "its largest weight" in page.eval("document.getElementById('thumbs-legend').textContent")
    assert "(the largest)" in page.eval("document.querySelector('#matrix .legend').textContent")
    rows = page.eval("[...document.querySelectorAll('#matrix tbody th')].map(t => t.textContent)")
    assert rows == ["I@1", "saw@2", "a@3", "saw@4"] and read_attention_html(tmp_path / "s.html")["queries"] == tokens
    labels = page.eval("[...document.querySelectorAll('#lines text')].map(t => t.textContent)")
    assert labels == ["I@1", "saw@2", "a@3", "saw@4"] * 2


def test_side_names_stay_in_view_when_the_lines_scroll(tmp_path, open_page):
    tokens = [f"w{i}" for i in range(80)]
    page = open_page(attention_html(weights(1, 1, 80, 80), tokens, tmp_path / "long.html"), height=600)
    page.eval("document.querySelector('.lines-box .scroll').scrollTop = 1000")
    top = page.eval("document.querySelector('#lines-head').getBoundingClientRect().top")
    box = page.eval("document.querySelector('.lines-box .scroll').getBoundingClientRect().top")
    assert top < box and page.eval("[...document.querySelectorAll('#lines-head text')].map(t => t.textContent)") == \
        ["query", "key"]
