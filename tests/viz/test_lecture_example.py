"""The page of ``attnkit lecture``: its matrices in Chromium, one column per query, equal the printed ones
and ``attnkit.explain``'s, for the unscaled single head and the scaled two heads with W^o."""

import json

import numpy as np
import torch

from attnkit import explain
from attnkit.viz.lecture import read_lecture_html
from tests.cli.test_lecture import run_lecture


def _cells(page, table):
    """The numbers of a matrix table of the page as (rows, cols)."""
    got = page.eval(f"[...document.querySelectorAll('#{table} tbody tr:not(.sum)')].map(r => "
                    "[...r.querySelectorAll('td')].map(c => c.textContent))")
    return np.array([[float(x) for x in r] for r in got])


def test_lecture_example_page_in_chromium_equals_explain(tmp_path, open_page):
    paths, _, m = run_lecture(tmp_path)
    d = read_lecture_html(paths["page"])
    page = open_page(paths["page"], width=1300)
    tol = 5e-4 + 1e-6
    assert page.eval("document.getElementById('where').textContent") == \
        'example 1: one head, no scaling, head 1, query 1 "a1"'
    assert "no scaling" in page.eval("document.getElementById('step1').textContent")
    one = d["layers"][0]
    q, k, v = (torch.tensor(one[x][0]) for x in ("q", "k", "v"))
    ex = explain(q, k, v, score="dot")
    I = torch.tensor(one["a"]).T  # noqa: E741
    assert np.abs(_cells(page, "m-I") - I.numpy()).max() <= tol
    assert np.abs(_cells(page, "m-Q") - (torch.tensor(one["wq"][0]) @ I).numpy()).max() <= tol  # Q = W^q I
    assert np.abs(_cells(page, "m-A") - ex.scores.T.numpy()).max() <= tol  # rows keys, columns queries
    assert np.abs(_cells(page, "m-Ap") - ex.weights.T.numpy()).max() <= tol
    assert np.abs(_cells(page, "m-O") - ex.out.T.numpy()).max() <= tol
    assert page.eval("document.querySelectorAll('#m-Wo').length") == 0  # example 1 has no W^o
    assert "the output is b^i itself" in page.eval("document.getElementById('step4').textContent")
    # example 2, head 2: the scaled scores, W^o and the merged output (the terminal's last matrix)
    page.select("#layer", 1)
    page.select("#head", 1)
    page.click("#m-A thead th[data-c='2']")  # a click on a column picks that query
    assert page.eval("document.getElementById('where').textContent") == \
        'example 2: two heads, scaled by 1/\u221a3, head 2, query 3 "a3"'
    assert "\u00d7 0.5774 (1/\u221a3)" in page.eval("document.getElementById('step1').textContent")
    two = d["layers"][1]
    ex2 = explain(*(torch.tensor(two[x][1]) for x in ("q", "k", "v")))  # scaled_dot: 1/sqrt(3)
    assert np.abs(_cells(page, "m-A") - ex2.scores.T.numpy()).max() <= tol
    assert np.abs(_cells(page, "m-Ap") - ex2.weights.T.numpy()).max() <= tol
    assert np.abs(_cells(page, "m-out") - m["O = W^o [O^1; O^2]"]["m"]).max() <= 2e-3  # printed with 3 decimals
    alphap = [float(x) for x in page.eval("[...document.querySelectorAll('#scores td.alphap')].map(e => "
                                          "e.textContent)")]
    assert np.abs(np.array(alphap) - ex2.weights[2].numpy()).max() <= tol
    caption = page.eval("document.querySelector('#m-Wq').closest('.mbox').querySelector('.caption').textContent")
    assert caption == "W^{q,2} (3 \u00d7 4)"
    assert json.loads(page.eval("JSON.stringify([...document.querySelectorAll('#m-Ap thead th.sel')].map(e => "
                                "e.textContent))")) == ["q^3 a3"]




def test_causal_lecture_in_terminal_page_and_png(tmp_path, open_page):
    """`attnkit lecture --causal`: the same examples masked as a decoder's self-attention; a later key reads
    "masked" in the printed A and "0 masked" in A', the page's matrices equal explain with the causal mask."""
    import contextlib
    import io

    from attnkit.cli import lecture

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        paths = lecture.run(tmp_path, seed=1, causal=True)
    text = buf.getvalue()
    assert "query q^i may look at keys k^1..k^i only" in text and "alpha'_ij = 0" in text
    a = text.split("A = K^T Q (4 x 4)")[1].splitlines()[2:6]  # rows k^1..k^4 of example 1's A
    assert [row.split()[1:].count("masked") for row in a] == [0, 1, 2, 3]
    ap = text.split("A' = softmax of each column of A (4 x 4)")[1].splitlines()[2:6]
    assert [row.count("0 masked") for row in ap] == [0, 1, 2, 3]
    assert paths["page"].name == "lecture_causal.html" and paths["attention"].name == "lecture_causal_attention.png"
    assert paths["attention"].read_bytes()[:4] == b"\x89PNG"
    d = read_lecture_html(paths["page"])
    causal = torch.ones(4, 4).tril().bool()
    assert all(np.array_equal(x["mask"], causal.numpy()) for x in d["layers"])
    page = open_page(paths["page"], width=1300)
    assert "masked (causal)" in page.eval("document.getElementById('title').textContent")
    one = d["layers"][0]
    ex = explain(*(torch.tensor(one[x][0]) for x in ("q", "k", "v")), causal, score="dot")
    got = page.eval("[...document.querySelectorAll('#m-Ap tbody tr:not(.sum)')].map(r => "
                    "[...r.querySelectorAll('td')].map(c => +c.textContent))")
    assert np.abs(np.array(got) - ex.weights.T.numpy()).max() <= 5e-4 + 1e-6
    assert page.eval("document.querySelectorAll('#m-Ap td.masked').length") == 6
    page.click("#tokens button[data-i='1']")  # q^2: keys 3 and 4 are its future
    assert "2 of the 4 keys are masked for q^2" in page.eval("document.getElementById('masked-note').textContent")
    printed = [float(x) for x in text.split("A' = softmax of each column of A (4 x 4)")[1].splitlines()[2].split()[1:]]
    assert np.abs(np.array(printed) - ex.weights[:, 0].numpy()).max() <= 5e-4  # the terminal's row k^1 of A'
