"""Encoders built with an attention variant: exact variants equal the masked reference encoder."""

import torch

from attnkit import masks as M
from attnkit.nn import Encoder, TransformerConfig, attention_factory


def test_exact_variant_encoder_equals_reference_with_its_mask():
    cfg = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=2, dropout=0.0, norm_first=True,
                            positional="learned", max_len=40)
    torch.manual_seed(0)
    ref = Encoder(cfg).double()
    lf = Encoder(cfg, attention=attention_factory("longformer", {"window": 3, "global_tokens": 1})).double()
    lf.load_state_dict(ref.state_dict())
    x = torch.randn(2, 40, 16, dtype=torch.float64)
    pad = M.padding([40, 25])
    out = lf(x, pad).last_hidden_state
    want = ref(x, (M.window(3, 3) | M.global_tokens(1)) & pad, backend="math").last_hidden_state
    torch.testing.assert_close(out, want, atol=1e-10, rtol=1e-8)


def test_approximate_variant_encoder_trains():
    cfg = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, positional="learned", max_len=30)
    enc = Encoder(cfg, attention=attention_factory("performer", {"num_features": 8}))
    x = torch.randn(2, 30, 16, requires_grad=True)
    enc(x, M.padding([30, 12])).last_hidden_state.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert type(enc.layers[0].self_attn).__name__ == "PerformerAttention"
