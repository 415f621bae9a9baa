"""The page machinery: packed arrays round-trip, text never becomes markup, writes are atomic."""

import json

import numpy as np
import pytest
import torch

from attnkit.viz.page import pack, read_page_data, unpack, write_page


def test_float32_is_exact_and_rounded_weights_keep_four_decimals():
    x = torch.randn(3, 4, 5)
    got = unpack(pack(x))
    assert got.shape == (3, 4, 5) and np.array_equal(got, x.numpy().astype(np.float64))
    w = torch.rand(2, 7).double()
    stored = unpack(pack(w, decimals=4))
    assert np.abs(stored - w.numpy()).max() <= 5e-5 + 1e-12
    assert np.array_equal(stored, np.round(w.numpy(), 4))  # exactly the 4-decimal values
    d = pack(w, decimals=4)
    assert d["dtype"] == "u2" and d["shape"] == [2, 7] and json.loads(json.dumps(d)) == d


def test_rounded_values_must_lie_in_unit_interval():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pack(torch.tensor([0.5, 1.5]), decimals=4)


def test_written_page_is_self_contained_and_escapes_text(tmp_path):
    nasty = "</script><script>alert(1)</script>"
    path = write_page(tmp_path / "p" / "x.html", title="</title><b>", body="<p id='a'></p>",
                      scripts=["static_page.js"], data={"t": nasty, "a": pack(np.eye(2))})
    text = path.read_text(encoding="utf-8")
    assert text.count("</script>") == 2 and "<title>&lt;/title&gt;&lt;b&gt;</title>" in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    d = read_page_data(path)
    assert d["t"] == nasty and np.array_equal(unpack(d["a"]), np.eye(2))
    assert not list(path.parent.glob("*.tmp"))
    (tmp_path / "other.html").write_text("<html></html>")
    with pytest.raises(ValueError, match="is not an attnkit page"):
        read_page_data(tmp_path / "other.html")
