"""The speech recogniser's inference encoder stack (``models.asr_infer``) against the modules' path, bit for bit."""

from __future__ import annotations

import pytest
import torch

from attnkit.functional import select_backend
from attnkit.models import asr_infer
from attnkit.models.asr import AsrConfig, AsrModel
from attnkit.nn import TransformerConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def model(seed: int = 0, encoder: dict | None = None, **config) -> AsrModel:
    torch.manual_seed(seed)
    enc = TransformerConfig(d_model=32, num_heads=2, d_ff=64, num_encoder_layers=2, num_decoder_layers=0,
                            dropout=0.0, positional="rope", norm_first=True, activation="gelu", max_len=4096)
    enc = enc.replace(**(encoder or {}))
    dec = enc.replace(num_encoder_layers=0, num_decoder_layers=1, positional="sinusoidal", max_len=64)
    m = AsrModel(AsrConfig(**{"n_mels": 8, "window": (2, 2), "encoder": enc, "decoder": dec, **config})).eval()
    with torch.no_grad():
        m.feature_mean.normal_()
        m.feature_std.uniform_(0.5, 2.0)
    return m


def inputs(lengths: list[int], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(len(lengths), max(lengths), 8, generator=g), torch.tensor(lengths)


@torch.no_grad()
def both(m: AsrModel, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The encoder's output through the modules and through ``encoder_stack``, on the same front-end output."""
    h = m.features(x, lengths)
    mask = m.encoder_mask(m.out_lengths(lengths).clamp(1, h.shape[1]))
    return m.encoder(h, mask).last_hidden_state, asr_infer.encoder_stack(m.encoder, h, mask)


@pytest.mark.parametrize("encoder,config", [
    ({}, {}),  # pre-LN, rotary, a window
    ({"norm_first": False, "activation": "relu"}, {}),  # post-LN
    ({"positional": "sinusoidal"}, {"window": None}),  # input positions, full attention
    ({"positional": "none", "bias": False}, {}),
    ({}, {"streaming": True, "window": (3, 0), "kernel": 3}),
])
def test_stack_equals_the_modules_bit_for_bit(encoder, config):
    m = model(encoder=encoder, **config)
    assert asr_infer.supports(m.encoder)
    ref, got = both(m, *inputs([61, 13, 40]))  # padded rows in a batch
    assert torch.equal(got, ref)
    ref, got = both(m, *inputs([77]))
    assert torch.equal(got, ref)


def test_long_inputs_keep_the_dispatch_tables_backend():
    m = model()
    x, lengths = inputs([2200])  # 550 steps, a window of 5: the table gives `local`
    h = m.features(x, lengths)
    q = torch.zeros(1, 2, h.shape[1], 16)
    with torch.no_grad():
        assert select_backend(q, q, q, m.encoder_mask(m.out_lengths(lengths))) == "local"
    ref, got = both(m, x, lengths)
    assert torch.equal(got, ref)


def test_encode_frames_takes_it_in_inference_only(monkeypatch):
    m = model()
    x, lengths = inputs([50, 31])
    with torch.no_grad():
        ref = m.encoder(m.features(x, lengths), m.encoder_mask(m.out_lengths(lengths))).last_hidden_state
    calls = []
    real = asr_infer.encoder_stack
    monkeypatch.setattr("attnkit.models.asr.encoder_stack", lambda *a: calls.append(1) or real(*a))
    with torch.inference_mode():
        enc = m.encode_frames(x, lengths)
    assert calls == [1]
    assert torch.equal(enc.ctc_log_probs, m.ctc_head(ref).log_softmax(-1))
    m.encode_frames(x, lengths)  # autograd on: the modules
    with torch.no_grad():
        m.encode_frames(x, lengths, need_weights=True)  # weights asked: the modules
        m.encode_frames(x, lengths, backend="sdpa")  # a backend named: the modules
        m.train()
        m.encode_frames(x, lengths)
    assert calls == [1]


def test_what_it_does_not_run_and_outputs_not_finite_take_the_modules(monkeypatch):
    assert not asr_infer.supports(model(encoder={"positional": "alibi"}).encoder)
    m = model()
    x, lengths = inputs([40])
    with torch.no_grad():
        ref = m.encoder(m.features(x, lengths), m.encoder_mask(m.out_lengths(lengths))).last_hidden_state
        monkeypatch.setattr("attnkit.models.asr.encoder_stack", lambda e, h, mask: torch.full_like(h, float("nan")))
        enc = m.encode_frames(x, lengths)  # a NaN out of the stack: the modules' answer (their NaN policy)
    assert torch.equal(enc.ctc_log_probs, m.ctc_head(ref).log_softmax(-1))
