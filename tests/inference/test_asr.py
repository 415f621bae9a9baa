"""The speech engine: a speech recogniser's encoder and CTC head read from its spec (rotary positions, window
masks, padding) give the model's outputs; the spec holds the whole encoder side (front end, feature statistics, mask
rule, CTC tap, memory positions); attention weights and gradients come from the model; models it cannot run stay
on their reference modules, saying why; the Transcriber decodes on it."""

import numpy as np
import pytest
import torch

from attnkit.data.audio import FeatureConfig
from attnkit.inference import AsrEngine, engine_for, refusal, spec_of
from attnkit.inference.architectures import architecture_of
from attnkit.tasks.transcriber import Transcriber
from tests.models.test_asr import frames, tiny_asr

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("config", [{}, {"window": None}, {"window": (3, 0), "streaming": True, "kernel": 3},
                                    {"frontend": "conv2d", "channels": 4}, {"subsample": 8, "ctc_layer": 1}])
def test_the_engine_gives_the_models_encoding(config):
    model = tiny_asr(3, **config)
    engine = engine_for(model)
    assert isinstance(engine, AsrEngine) and engine.config is model.config
    assert (engine.frontend is None) == (model.config.frontend == "conv2d")  # conv1d: as matrix products
    x, n = frames(4)  # padded rows of different lengths
    with torch.inference_mode():
        want, got = model.encode_frames(x, n), engine.encode_frames(x, n)
        only = engine.encode_frames(x, n, ctc_only=True)  # with ctc_layer 1: one layer of two
    assert torch.equal(got.mask, want.mask) and torch.equal(got.lengths, want.lengths)
    torch.testing.assert_close(got.memory, want.memory, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.ctc_log_probs, want.ctc_log_probs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(only.ctc_log_probs, want.ctc_log_probs, atol=1e-5, rtol=1e-5)
    assert not torch.equal(got.ctc_log_probs[0], got.ctc_log_probs[1])  # not a constant


def test_the_spec_holds_the_encoder_with_rotary_positions_and_the_ctc_head():
    model = tiny_asr(0)
    spec = spec_of(model)
    assert spec.settings.architecture == "asr" and spec.source_embedding is None and spec.decoder is None
    assert spec.encoder.positions.kind == "rope" and len(spec.encoder.layers) == 2 and spec.encoder.norm is not None
    assert torch.equal(spec.output.weight, model.ctc_head.weight) and torch.equal(spec.output.bias, model.ctc_head.bias)
    cos, sin = spec.encoder.positions.rotary(5, 16)
    assert cos.shape == sin.shape == (5, 8) and torch.equal(cos[0], torch.ones(8))
    assert float(sin[1, 0]) == pytest.approx(np.sin(1.0), abs=1e-7) and float(sin[1, 1]) < float(sin[1, 0])


@pytest.mark.parametrize("config", [{"frontend": "conv2d", "channels": 4}, {"subsample": 8, "ctc_layer": 1},
                                    {"window": (3, 0), "streaming": True, "kernel": 3}])
def test_the_spec_holds_the_encoder_side(config):
    model = tiny_asr(4, **config)
    names = architecture_of(model).names(model.state_dict())
    kept = set(model.state_dict()) - set(names.values())
    assert kept and all(n.startswith(("decoder.", "embed.")) for n in kept)  # the decoder stays on the model
    sp = spec_of(model).speech
    assert sp.kind == model.config.frontend and sp.window == model.config.window
    assert sp.time_pad == model.frontend.time_pad() and len(sp.convs) == model.subsample.bit_length() - 1
    assert sp.ctc_layers == model.config.ctc_layers and (sp.ctc_norm is None) == (model.ctc_norm is None)
    assert torch.equal(sp.mean, model.feature_mean) and torch.equal(sp.std, model.feature_std)
    assert (sp.project is None) == (model.config.frontend == "conv1d")
    x, n = frames(3)
    with torch.inference_mode():
        got, want = engine_for(model).front(x, n), model.front(x, n)
    assert torch.equal(got[1], want[1])
    if model.config.frontend == "conv2d":  # the module's maths on the spec's tensors: the same bits
        assert torch.equal(got[0], want[0])
    else:  # conv1d: as matrix products
        torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)


def test_weights_and_gradients_come_from_the_model():
    model = tiny_asr(1)
    engine = engine_for(model)
    x, n = frames(2)
    with torch.no_grad():
        want = model.encode_frames(x, n, need_weights=True)
        got = engine.encode_frames(x, n, need_weights=True)
    assert torch.equal(got.ctc_log_probs, want.ctc_log_probs)
    got = engine.encode_frames(x, n)  # grad mode: the model's modules, so training through it works
    got.ctc_log_probs.sum().backward()
    assert model.ctc_head.weight.grad is not None


def test_a_model_the_engine_cannot_run_stays_on_its_modules(caplog):
    model = tiny_asr(2, encoder=tiny_asr(2).config.encoder.replace(positional="alibi"))
    assert refusal(model) == "encoder positions 'alibi'; the speech engine runs rope or none"
    with caplog.at_level("INFO", logger="attnkit"):
        assert engine_for(model) is model
    assert "runs on its reference modules: encoder positions 'alibi'" in caplog.text


def test_the_transcriber_decodes_on_the_engine():
    model = tiny_asr(5)
    tr = Transcriber(model, {"features": FeatureConfig(n_mels=8).to_dict(), "max_seconds": 2.0})
    assert isinstance(tr.encoder, AsrEngine) and tr.model is model
    x, n = frames(3)
    rows = [x[i, :int(n[i])] for i in range(3)]
    got = tr.decode(rows, beam=2, ctc_weight=0.5)
    tr.encoder = model
    assert tr.decode(rows, beam=2, ctc_weight=0.5) == got


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 0.05), (torch.int8, 0.1)])
def test_the_engine_runs_in_bfloat16_and_with_int8_weights(dtype, tol):
    model = tiny_asr(3)
    engine = engine_for(model, dtype=dtype)
    assert isinstance(engine, AsrEngine) and next(model.parameters()).dtype == torch.float32  # model unchanged
    x, n = frames(3)
    with torch.inference_mode():
        want = model.encode_frames(x, n).ctc_log_probs
        got = engine.encode_frames(x.to(dtype) if dtype.is_floating_point else x, n).ctc_log_probs
    assert got.dtype == torch.float32 and 0 < float((got - want).abs().max()) < tol
