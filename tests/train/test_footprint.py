"""attnkit.train.footprint: the memory estimate a run is checked against before it is built."""

import pytest

from attnkit.nn import TransformerConfig
from attnkit.train.footprint import check_training_memory, training_bytes

GB = 2**30


def test_the_estimate_counts_parameters_adamw_state_and_activations():
    cfg = TransformerConfig(d_model=4, num_heads=1, d_ff=8, num_encoder_layers=1, num_decoder_layers=0)
    # parameters: 4 d^2 + 2 d f = 64 + 64 = 128, plus 10 x 4 embedding rows: 168, x 16 bytes
    # activations: 6 tokens x (8 d + 2 f + 2 vocab) = 6 x 68 floats; attention: 2 sequences x 3 x 3 x 2 floats
    assert training_bytes(cfg, vocab=10, tokens=6, seq_len=3) == 16 * 168 + 4 * (6 * 68 + 2 * 1 * 9 * 2)


def test_real_runs_fit_and_impossible_ones_do_not():
    translate = TransformerConfig(d_model=256, num_heads=4, d_ff=1024, num_encoder_layers=3, num_decoder_layers=3)
    assert training_bytes(translate, vocab=8000, tokens=3000, seq_len=128) < 1 * GB  # the default translation run
    base = TransformerConfig()  # the paper's base model, 25k tokens a batch
    assert training_bytes(base, vocab=37000, tokens=25000, seq_len=64) < 20 * GB
    wide = translate.replace(d_model=65536, num_heads=8)
    assert training_bytes(wide, vocab=8000, tokens=3000, seq_len=128) > 1000 * GB
    assert training_bytes(translate, vocab=2**24, tokens=3000, seq_len=128) > 100 * GB


def test_the_check_names_the_run_in_one_line():
    cfg = TransformerConfig(d_model=65536, num_heads=8, num_encoder_layers=3, num_decoder_layers=3)
    with pytest.raises(ValueError) as e:
        check_training_memory("train translate: this run", cfg, vocab=8000, tokens=3000, seq_len=128,
                              available=20 * GB)
    msg = str(e.value)
    assert msg.startswith("train translate: this run (parameters, AdamW state and one batch's activations) needs "
                          "about ") and msg.endswith("more than the 20.0 GB this machine has available")
    assert "\n" not in msg
    small = cfg.replace(d_model=64, num_heads=2, d_ff=128)
    assert check_training_memory("x", small, vocab=100, tokens=100, seq_len=10, available=20 * GB) < GB
