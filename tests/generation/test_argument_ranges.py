"""generate / mask_predict: every number in its stated range (the command line's decoding options take the same
ranges), the token arrays' memory checked, all before the model runs."""

from __future__ import annotations

import math

import pytest
import torch

import attnkit.nn.limits
from attnkit.generation import generate, mask_predict
from attnkit.generation.generate import RANGES

from .test_generate import sources, tiny_model


class _Untouchable(torch.nn.Module):
    """A model whose every use fails: the checks must refuse the call before it is reached."""

    def __getattr__(self, name):
        if name == "config":
            return type("Config", (), {"max_positions": 16, "pad_token_id": 0, "eos_token_id": 2,
                                       "bos_token_id": 1, "decoder_start_token_id": None, "mask_id": 3,
                                       "length": "classifier", "tgt_vocab_size": 24})()
        if name == "decode_parallel":
            return lambda *a, **k: pytest.fail("decode_parallel ran")
        raise AssertionError(f"the model was used ({name}) before the arguments were checked")


IDS = torch.tensor([[5, 6, 2]])


@pytest.mark.parametrize("kw,words", [
    ({"num_beams": 10**6}, "`num_beams` must be an integer in [1, 1024], got 1000000"),
    ({"max_new_tokens": 10**9}, "`max_new_tokens` must be an integer in [0, 65536], got 1000000000"),
    ({"do_sample": True, "temperature": 1e-45}, "`temperature` must be a number in [0.0001, 10000], got 1e-45"),
    ({"do_sample": True, "temperature": math.inf}, "`temperature` must be a number in [0.0001, 10000], got inf"),
    ({"num_beams": 4, "length_penalty": math.nan}, "`length_penalty` must be a number in [-100, 100], got nan"),
    ({"do_sample": True, "top_p": math.nan}, "`top_p` must be a number in (0, 1], got nan"),
    ({"do_sample": True, "top_k": -1}, "`top_k` must be an integer in [0, 16777216], got -1"),
    ({"do_sample": True, "seed": 2**70}, "`seed` must be an integer in [0, 9223372036854775807], got "
                                         "1180591620717411303424"),
    ({"min_new_tokens": 1.5}, "`min_new_tokens` must be an integer in [0, 65536], got 1.5"),
])
def test_generate_refuses_numbers_outside_their_range_before_the_model_runs(kw, words):
    with pytest.raises(ValueError) as e:
        generate(_Untouchable(), IDS, **kw)
    assert str(e.value) == f"generate: {words}"


def test_mask_predict_refuses_a_million_iterations_before_the_model_runs():
    with pytest.raises(ValueError, match=r"^mask_predict: `iterations` must be an integer in \[1, 1024\], got "
                                         r"1000000$"):
        mask_predict(_Untouchable(), IDS, iterations=10**6)
    with pytest.raises(ValueError, match=r"`length_candidates` must be an integer in \[1, 256\]"):
        mask_predict(_Untouchable(), IDS, length_candidates=10**4)


def test_the_token_arrays_memory_is_checked_before_the_model_runs(monkeypatch):
    monkeypatch.setattr(attnkit.nn.limits, "available_memory", lambda *a, **k: 2**30)
    ids = torch.zeros((64, 3), dtype=torch.long)
    with pytest.raises(ValueError, match=r"^generate: decoding 64 sentences with num_beams=1024 and "
                                         r"max_new_tokens=65536 needs about 96\.0 GB of memory \(an estimate\), "
                                         r"more than the 1\.0 GB"):
        generate(_Untouchable(), ids, num_beams=1024, max_new_tokens=65536)


def test_the_edges_of_the_ranges_decode():
    model = tiny_model()
    src, mask = sources(2)
    out = generate(model, src, mask, do_sample=True, temperature=RANGES["temperature"].low, seed=2**63 - 1,
                   max_new_tokens=4)
    greedy = generate(model, src, mask, max_new_tokens=4)
    assert torch.equal(out.sequences, greedy.sequences)  # the coldest temperature allowed samples the argmax
    hot = generate(model, src, mask, do_sample=True, temperature=RANGES["temperature"].high, seed=0, max_new_tokens=4)
    assert torch.isfinite(hot.log_probs).all()
    wide = generate(model, src, mask, num_beams=4, length_penalty=-100.0, max_new_tokens=4)
    assert torch.isfinite(wide.sequences_scores).all()
