"""``attnkit lecture``: one story in three places. The terminal prints both examples (one head unscaled, two
heads scaled by 1/sqrt(3)) matrix by matrix with their axes named; lecture.html holds the same numbers
(checked in Chromium against the printed matrices and ``attnkit.explain``); lecture_attention.png draws
the same A' with one column per query."""

import re

import numpy as np
import pytest

from attnkit.cli import lecture
from attnkit.cli.main import main
from attnkit.viz import heatmap as hm
from attnkit.viz.lecture import read_lecture_html


def matrices(text: str) -> dict:
    """Every printed matrix by its name: 'NAME (r x c)  note', a header of column labels, r labelled rows."""
    out, lines = {}, text.splitlines()
    for n, line in enumerate(lines):
        m = re.match(r"^(\S.*?) \((\d+) x (\d+)\)", line)
        if m:
            rows = int(m.group(2))
            out[m.group(1)] = {"note": line[m.end():].strip(), "cols": lines[n + 1].split(),
                               "rows": [r.split()[0] for r in lines[n + 2:n + 2 + rows]],
                               "m": np.array([[float(x) for x in r.split()[1:]] for r in lines[n + 2:n + 2 + rows]])}
    return out


def run_lecture(out):
    """(paths, printed text, printed matrices) of ``attnkit lecture`` with seed 1."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        paths = lecture.run(out, seed=1)
    return paths, buf.getvalue(), matrices(buf.getvalue())


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    return run_lecture(tmp_path_factory.mktemp("lecture"))


def test_terminal_tells_both_examples_with_every_matrix_in_full(printed):
    _, text, m = printed
    assert "Example 1: one head, no scaling" in text and "Example 2: two heads, each score scaled by 1/sqrt(d) = " \
        "1/sqrt(3) = 0.5774" in text
    I, wq, wk, wv = (m[k]["m"] for k in ("I = [a^1 a^2 a^3 a^4]", "W^q", "W^k", "W^v"))
    assert I.shape == (4, 4) and wq.shape == wk.shape == wv.shape == (3, 4)
    # Q = W^q I by hand, from the printed numbers (3 decimals each)
    assert np.abs(wq @ I - m["Q = W^q I"]["m"]).max() < 0.02 and np.abs(wk @ I - m["K = W^k I"]["m"]).max() < 0.02
    a = m["A = K^T Q"]
    assert a["cols"] == ["q^1", "q^2", "q^3", "q^4"] and a["rows"] == ["k^1", "k^2", "k^3", "k^4"]
    assert a["note"].endswith("no scaling") and np.abs(m["K = W^k I"]["m"].T @ m["Q = W^q I"]["m"] - a["m"]).max() < .05
    p1 = m["A' = softmax of each column of A"]["m"]
    np.testing.assert_allclose(p1.sum(0), 1, atol=2e-3)  # columns are queries: each sums to 1
    for h in (1, 2):  # the heads: their own W's, scaled scores
        q, k = m[f"Q^{h} = W^{{q,{h}}} I"], m[f"K^{h} = W^{{k,{h}}} I"]
        assert np.abs(m[f"W^{{q,{h}}}"]["m"] @ I - q["m"]).max() < 0.02 and q["cols"][0] == f"q^{{1,{h}}}"
        scaled = m[f"A^{h} = (K^{h})^T Q^{h} / sqrt(3)"]
        assert "scaled by 1/sqrt(3) = 0.5774" in scaled["note"]
        assert np.abs(k["m"].T @ q["m"] / np.sqrt(3) - scaled["m"]).max() < 0.05
        np.testing.assert_allclose(m[f"A'^{h} = softmax of each column of A^{h}"]["m"].sum(0), 1, atol=2e-3)
    heads = np.concatenate([m["O^1 = V^1 A'^1"]["m"], m["O^2 = V^2 A'^2"]["m"]])
    assert np.abs(m["W^o"]["m"] @ heads - m["O = W^o [O^1; O^2]"]["m"]).max() < 0.05


def test_page_and_png_hold_the_printed_examples(printed, monkeypatch, tmp_path):
    paths, _, m = printed
    assert set(paths) == {"page", "attention"}
    d = read_lecture_html(paths["page"])
    one, two = d["layers"]
    assert d["layer_names"] == ["example 1: one head, no scaling", "example 2: two heads, scaled by 1/\u221a3"]
    assert d["queries"] == lecture.TOKENS and one["scale"] == 1.0 and two["scale"] == 3 ** -0.5
    assert one["q"].shape == (1, 4, 3) and two["q"].shape == (2, 4, 3) and not one["merge"] and two["merge"]
    assert np.abs(one["a"].T - m["I = [a^1 a^2 a^3 a^4]"]["m"]).max() < 5e-4
    assert np.abs(one["wq"][0] - m["W^q"]["m"]).max() < 5e-4 and np.abs(two["wv"][1] - m["W^{v,2}"]["m"]).max() < 5e-4
    assert np.abs(two["o"].T - m["O = W^o [O^1; O^2]"]["m"]).max() < 5e-4
    # the PNG: A' of example 1 and of both heads, one column per query, one absolute colour bar
    assert paths["attention"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    figures = []
    monkeypatch.setattr(hm, "save_figure", lambda fig, path: figures.append(fig) or path)
    monkeypatch.setattr(hm.pyplot(), "close", lambda fig: None)
    lecture.run(tmp_path, seed=1)
    fig = figures[0]
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    bar = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"][0]
    assert [ax.get_title() for ax in panels] == ["example 1: one head,\nno scaling", "example 2, head 1:\nscaled by "
                                                 "1/sqrt(3)", "example 2, head 2:\nscaled by 1/sqrt(3)"]
    assert bar.get_ylim() == (0.0, 1.0) and "each column sums to 1" in bar.get_ylabel()
    names = ["A' = softmax of each column of A", "A'^1 = softmax of each column of A^1",
             "A'^2 = softmax of each column of A^2"]
    for ax, name in zip(panels, names):
        assert ax.get_xlabel() == "query q^i: one column each" and ax.get_ylabel() == "key k^j: one row each"
        assert [t.get_text() for t in ax.get_xticklabels()] == [f"q^{i} a{i}" for i in range(1, 5)]
        assert np.abs(ax.images[0].get_array() - m[name]["m"]).max() < 5e-4  # drawn as printed


def test_cli_entry_point(tmp_path, capsys):
    assert main(["lecture", "--out", str(tmp_path), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "O = V A'" in out and "wrote" in out and (tmp_path / "lecture_attention.png").exists()
    assert main([]) == 2
