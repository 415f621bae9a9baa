import pytest
import torch

from attnkit.models.tagger import Tagger, TaggerConfig
from attnkit.nn import TransformerConfig

ENC = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, dropout=0.0, positional="rope")


def test_padding_does_not_change_the_scores():
    torch.manual_seed(0)
    m = Tagger(TaggerConfig(vocab_size=10, char_vocab_size=8, num_tags=3, word_dim=8, char_dim=4, char_channels=6,
                            encoder=ENC)).eval()
    words = torch.tensor([[2, 3, 4]])
    chars = torch.tensor([[[2, 3], [4, 0], [5, 6]]])
    alone = m(words, chars, torch.tensor([3]))
    padded = m(torch.tensor([[2, 3, 4, 0, 0]]), torch.cat([chars, torch.zeros(1, 2, 2, dtype=torch.long)], 1),
               torch.tensor([3]))
    assert alone.shape == (1, 3, 3)
    torch.testing.assert_close(padded[:, :3], alone)


def test_config_validation_and_roundtrip():
    with pytest.raises(ValueError, match="`num_tags`"):
        TaggerConfig(vocab_size=10, char_vocab_size=8, num_tags=0)
    cfg = TaggerConfig(vocab_size=10, char_vocab_size=8, num_tags=3, encoder=ENC)
    assert TaggerConfig.from_dict(cfg.to_dict()) == cfg
