import pytest
import torch

from attnkit.models.vision import VisionConfig, VisionTransformer, image_to_vectors
from attnkit.nn import TransformerConfig

ENC = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, positional="learned", max_len=51,
                        norm_first=True, dropout=0.0)


def test_lecture_example_5x10x3_is_50_vectors_of_3():
    x = torch.arange(2 * 3 * 5 * 10, dtype=torch.float32).reshape(2, 3, 5, 10)
    v = image_to_vectors(x, 1)
    assert v.shape == (2, 50, 3)
    # pixel (row 1, col 2) is vector 1 * 10 + 2 and holds its three channel values
    assert v[0, 12].tolist() == [x[0, c, 1, 2].item() for c in range(3)]


def test_patches_are_row_major_flattened():
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    v = image_to_vectors(x, 2)
    assert v.shape == (1, 4, 4)
    assert v[0, 1].tolist() == [2.0, 3.0, 6.0, 7.0]  # top-right patch


def test_model_shapes_and_class_token_attention():
    cfg = VisionConfig(height=5, width=10, channels=3, mode="pixels", num_classes=4, encoder=ENC)
    logits, attn = VisionTransformer(cfg)(torch.randn(2, 3, 5, 10), need_weights=True)
    assert logits.shape == (2, 4) and attn[0].shape == (2, 2, 51, 51)
    torch.testing.assert_close(attn[0].sum(-1), torch.ones(2, 2, 51))


def test_config_errors():
    with pytest.raises(ValueError, match="does not divide"):
        VisionConfig(height=8, width=8, patch_size=3, encoder=ENC)
    with pytest.raises(ValueError, match="max_len"):
        VisionConfig(height=8, width=8, mode="pixels", encoder=ENC.replace(max_len=10))
    with pytest.raises(ValueError, match=r"\(B, 3, 5, 10\)"):
        cfg = VisionConfig(height=5, width=10, channels=3, mode="pixels", encoder=ENC)
        VisionTransformer(cfg)(torch.randn(2, 5, 10))


def test_config_roundtrip():
    cfg = VisionConfig(height=8, width=8, encoder=ENC)
    assert VisionConfig.from_dict(cfg.to_dict()) == cfg
