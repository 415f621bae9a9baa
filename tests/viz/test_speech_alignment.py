"""The speech recogniser's cross-attention: the PNG over the sound's time axis, and its lecture page, whose
numbers (computed in the page, in headless Chromium) equal the attention the decoder used while decoding."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnkit.data.audio import FeatureConfig
from attnkit.tasks.transcriber import Transcriber
from attnkit.viz import read_lecture_html
from attnkit.viz.speech_alignment import speech_cross_attention_png
from tests.models.test_asr import tiny_asr

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def transcriber():
    return Transcriber(tiny_asr(2), {"features": FeatureConfig(n_mels=8).to_dict()})


def test_png_checks_its_inputs(tmp_path):
    w = torch.rand(2, 2, 3, 10).softmax(-1)
    path = speech_cross_attention_png(torch.randn(40, 8), w, ["1", "2", "END"], tmp_path / "a.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="2 token labels for 3 rows"):
        speech_cross_attention_png(torch.randn(40, 8), w, ["1", "END"], tmp_path / "b.png")
    with pytest.raises(ValueError, match=r"\(layers, heads, t, S\)"):
        speech_cross_attention_png(torch.randn(40, 8), w[0], ["1", "2", "END"], tmp_path / "b.png")


def test_lecture_page_holds_the_decoders_own_attention(transcriber, tmp_path, open_page):
    x = (0.3 * np.sin(np.arange(6000) / 5.0)).astype(np.float32)
    path, al = transcriber.lecture(x, tmp_path / "lecture.html")
    d = read_lecture_html(path)
    t, s = al.weights.shape[2], al.weights.shape[3]
    assert d["queries"] == al.labels and len(al.labels) == t > 1  # (a random model: digits until the limit)
    assert len(d["keys"]) == s and d["layer_names"] == ["cross-attention layer 1", "cross-attention layer 2"]
    page = open_page(path, width=1400)
    tol = 5e-4 + 2e-6  # shown with 3 decimals
    for layer, head, token in ((0, 1, 0), (1, 0, t - 1)):
        page.select("#layer", layer)
        page.select("#head", head)
        page.click(f"#tokens button[data-i='{token}']")
        shown = page.eval(f"[...document.querySelectorAll({json.dumps('#scores td.alphap')})]"
                          ".map(e => e.textContent)")
        want = al.weights[layer, head, token].numpy()  # what the decoder used at that step, with its K/V cache
        assert np.abs(np.array([float(v) for v in shown]) - want).max() <= tol
