import pytest
import torch

from attnkit import masks
from attnkit.nn import MultiHeadAttention, Transformer, TransformerConfig


def test_self_attention_shapes_and_weights():
    m = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    out = m(x, need_weights=True)
    assert out.out.shape == (2, 5, 16) and out.weights.shape == (2, 4, 5, 5) and out.cache is None
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, 4, 5))
    assert m(x).weights is None


def test_dense_batch_mask_broadcasts_over_heads():
    m = MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 4, 8)
    dense = torch.rand(2, 4, 4) < 0.6
    dense[..., 0] = True
    out = m(x, mask=dense, need_weights=True)
    assert (out.weights[~dense.unsqueeze(1).expand(-1, 2, -1, -1)] == 0).all()


def test_kv_cache_matches_full_causal_pass():
    m = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 6, 16)
    full = m(x, mask=masks.causal()).out
    cache, steps = None, []
    for t in range(6):
        o = m(x[:, t: t + 1], mask=masks.causal(), cache=cache, use_cache=True)
        cache = o.cache
        steps.append(o.out)
    assert cache.length == 6
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-6, rtol=0)


def test_cross_attention_cache_is_static():
    m = MultiHeadAttention(8, 2, kdim=5, vdim=3).eval()
    q, mem = torch.randn(1, 2, 8), torch.randn(1, 7, 5)
    first = m(q, mem, mem[..., :3], use_cache=True)
    assert first.cache.static and first.cache.length == 7
    again = m(q, cache=first.cache)
    torch.testing.assert_close(again.out, first.out)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "relative", "rope", "alibi", "none"])
def test_incremental_decoding_equals_full_decoding(positional):
    cfg = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, num_decoder_layers=2,
                            dropout=0.0, positional=positional)
    model = Transformer(cfg).eval()
    src, tgt = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    full = model(src, tgt, src_mask=masks.padding([5, 3]))
    memory = model.encoder(src, masks.padding([5, 3])).last_hidden_state
    cache, steps = None, []
    for t in range(4):
        d = model.decoder(tgt[:, t: t + 1], memory, memory_mask=masks.padding([5, 3]), cache=cache, use_cache=True)
        cache = d.cache
        steps.append(d.last_hidden_state)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


def test_encoder_outputs_hidden_states_and_attentions():
    cfg = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=3, dropout=0.0)
    enc = Transformer(cfg).encoder.eval()
    out = enc(torch.randn(2, 4, 16), need_weights=True, output_hidden_states=True)
    assert len(out.hidden_states) == 4 and len(out.attentions) == 3
    assert out.attentions[0].shape == (2, 2, 4, 4)
    torch.testing.assert_close(out.hidden_states[-1], out.last_hidden_state)


def test_relative_position_changes_with_order_but_sinusoid_free_encoder_does_not():
    x = torch.randn(1, 5, 16)
    perm = torch.tensor([4, 2, 0, 1, 3])
    for positional, equivariant in (("none", True), ("relative", False), ("rope", False), ("alibi", False)):
        enc = Transformer(TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1,
                                            num_decoder_layers=0, dropout=0.0, positional=positional)).encoder.eval()
        a = enc(x).last_hidden_state[:, perm]
        b = enc(x[:, perm]).last_hidden_state
        assert torch.allclose(a, b, atol=1e-5) == equivariant, positional


def test_device_and_dtype_factory_arguments():
    m = MultiHeadAttention(8, 2, device="cpu", dtype=torch.float64)
    assert m.in_proj.weight.dtype == torch.float64
    assert m(torch.randn(1, 3, 8, dtype=torch.float64)).out.dtype == torch.float64
    enc = Transformer(TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1,
                                        num_decoder_layers=1), dtype=torch.bfloat16).encoder.eval()
    assert enc(torch.randn(1, 3, 8, dtype=torch.bfloat16)).last_hidden_state.dtype == torch.bfloat16


@pytest.mark.parametrize("call, message", [
    (lambda: MultiHeadAttention(10, 3), "divisible"),
    (lambda: MultiHeadAttention(8, 2)(torch.randn(2, 3, 7)), r"`query` must have shape \(B, L, 8\)"),
    (lambda: MultiHeadAttention(8, 2)(torch.randn(2, 3, 8), torch.randn(3, 4, 8)), "batch sizes"),
    (lambda: Transformer(TransformerConfig(d_model=8, num_heads=2, d_ff=8, positional="learned", max_len=4))
     .encoder(torch.randn(1, 6, 8)), "max_len=4"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
