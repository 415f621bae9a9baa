"""generation.texts: padding a batch of id lists, and translate_texts' order, empty texts and batches."""

import warnings

import pytest
import torch

from attnkit.generation.texts import TranslationWarning, pad_batch, translate_texts


@pytest.mark.parametrize("rows", [[[5, 6, 7]], [[5, 6], [7, 8]], [[5, 6, 7], [8], [9, 10]]])
def test_pad_batch_right_pads_with_a_mask_of_the_real_tokens(rows):
    ids, mask = pad_batch(rows, pad_id=0)
    s = max(len(r) for r in rows)
    assert ids.shape == mask.shape == (len(rows), s) and ids.dtype == mask.dtype == torch.long
    for i, r in enumerate(rows):
        assert ids[i].tolist() == r + [0] * (s - len(r))
        assert mask[i].tolist() == [1] * len(r) + [0] * (s - len(r))


def test_translate_texts_keeps_the_order_batches_by_length_and_warns_on_empty_texts():
    seen = []

    class Out:
        def __init__(self, ids):
            self.sequences = ids

    def generate(ids, mask):
        seen.append((tuple(ids.shape), None if mask is None else mask.tolist()))
        return Out(ids if mask is None else ids * mask)

    texts = ["a b c", "", "d", "e f"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = translate_texts(texts, source_ids=lambda t, where: [len(w) + 4 for w in t.split()], pad_id=0,
                              generate=generate, decode=lambda row: " ".join(str(int(v)) for v in row if v),
                              batch_size=2)
    assert out == ["5 5 5", "", "5", "5 5"]
    # the two shortest first, then the longest: little padding; a batch with nothing padded gets no mask
    assert seen == [((2, 2), [[1, 0], [1, 1]]), ((1, 3), None)]
    assert [type(w.message) for w in caught] == [TranslationWarning]


def test_translate_texts_can_count_its_texts_on_a_progress_bar(capsys):
    class Out:
        def __init__(self, ids):
            self.sequences = ids

    kw = dict(source_ids=lambda t, where: [len(w) + 4 for w in t.split()], pad_id=0,
              generate=lambda ids, mask: Out(ids if mask is None else ids * mask),
              decode=lambda row: " ".join(str(int(v)) for v in row if v),
              batch_size=2)
    texts = ["a b c", "d", "e f", "g h i j", "k"]
    quiet = translate_texts(texts, **kw)
    assert capsys.readouterr().err == ""
    assert translate_texts(texts, progress=True, **kw) == quiet  # the same translations
    err = capsys.readouterr().err
    assert "translate" in err and "5/5" in err  # every text counted, on stderr
