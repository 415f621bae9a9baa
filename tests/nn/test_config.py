import pytest

from attnkit.nn import PRESETS, Encoder, Transformer, TransformerConfig, preset


@pytest.mark.parametrize("kw, message", [
    ({"d_model": 30, "num_heads": 4}, "divisible"),
    ({"dropout": 1.0}, "dropout"),
    ({"activation": "tanh"}, "activation"),
    ({"positional": "fourier"}, "positional"),
    ({"num_heads": 0}, "num_heads"),
    ({"d_model": 12, "num_heads": 4, "positional": "rope"}, "even head size"),
    ({"num_encoder_layers": -1}, "num_encoder_layers"),
])
def test_config_validated_on_creation(kw, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**kw)


def test_config_is_frozen_and_round_trips():
    cfg = preset("tiny", positional="rope")
    with pytest.raises(AttributeError):
        cfg.d_model = 3  # type: ignore[misc]
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown keys"):
        TransformerConfig.from_dict({**cfg.to_dict(), "heads": 3})
    assert cfg.use_final_norm is False and preset("tiny", norm_first=True).use_final_norm is True


def _count(m):
    return sum(p.numel() for p in m.parameters())


def test_preset_parameter_counts_are_pinned():
    # "base": 6+6 layers of d_model 512, h 8, d_ff 2048, without embeddings. Per encoder layer:
    # 4*512*512 + 4*512 (attention) + 2*512*2048 + 2048 + 512 (FFN) + 2*2*512 (norms) = 3,152,384;
    # per decoder layer one more attention (1,050,624) and norm (1,024): 4,204,032.
    assert _count(Encoder(PRESETS["base"])) == 6 * 3_152_384
    assert _count(Transformer(PRESETS["base"])) == 6 * 3_152_384 + 6 * 4_204_032 == 44_138_496
    assert _count(Transformer(PRESETS["small"])) == 7_372_800
    assert _count(Transformer(PRESETS["tiny"])) == 167_424
