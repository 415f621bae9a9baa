import pytest
import torch

from attnkit.models.classifier import ClassifierConfig, SequenceClassifier, pool
from attnkit.nn import TransformerConfig

ENC = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, dropout=0.0, positional="rope")


def test_pool_ignores_padding():
    h = torch.tensor([[[1.0], [3.0], [100.0]]])
    assert pool(h, torch.tensor([2]), "mean").tolist() == [[2.0]]
    assert pool(h, torch.tensor([2]), "meanmax").tolist() == [[2.0, 3.0]]


def test_padding_invariance_and_shapes():
    torch.manual_seed(0)
    m = SequenceClassifier(ClassifierConfig(vocab_size=20, num_classes=3, encoder=ENC)).eval()
    a = m(torch.tensor([[4, 5, 6]]), torch.tensor([3]))
    b = m(torch.tensor([[4, 5, 6, 0, 0]]), torch.tensor([3]))
    assert a.shape == (1, 3)
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="`pooling`"):
        ClassifierConfig(vocab_size=2, num_classes=2, pooling="cls")
