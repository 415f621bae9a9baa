"""Parity with torch.nn.MultiheadAttention / TransformerEncoderLayer / TransformerDecoderLayer /
Transformer, weights copied across, float32, padding and causal masks."""

import pytest
import torch
from torch import nn

from attnkit import masks
from attnkit.nn import DecoderLayer, EncoderLayer, MultiHeadAttention, Transformer, TransformerConfig

B, S, T, D, H, FF = 3, 7, 5, 32, 4, 64
SRC_LEN = torch.tensor([7, 4, 1])
TGT_LEN = torch.tensor([5, 5, 2])


def _kpm(lengths, n):  # torch's inverted convention: True = ignore
    return torch.arange(n)[None] >= lengths[:, None]


def _causal_bool(n):  # torch's inverted convention: True = blocked
    return torch.ones(n, n, dtype=torch.bool).triu(1)


def _copy_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention):
    with torch.no_grad():
        if ours.packed:
            ours.in_proj.weight.copy_(theirs.in_proj_weight)
            ours.in_proj.bias.copy_(theirs.in_proj_bias)
        else:
            ours.q_proj.weight.copy_(theirs.q_proj_weight)
            ours.k_proj.weight.copy_(theirs.k_proj_weight)
            ours.v_proj.weight.copy_(theirs.v_proj_weight)
            b = theirs.in_proj_bias.chunk(3)
            ours.q_proj.bias.copy_(b[0])
            ours.k_proj.bias.copy_(b[1])
            ours.v_proj.bias.copy_(b[2])
        ours.out_proj.load_state_dict(theirs.out_proj.state_dict())


def _copy_ff_norms(ours, theirs, n_norms):
    with torch.no_grad():
        ours.ff.linear1.load_state_dict(theirs.linear1.state_dict())
        ours.ff.linear2.load_state_dict(theirs.linear2.state_dict())
        blocks = [b for b in ours.children() if hasattr(b, "norm")]
        for block, i in zip(blocks, range(1, n_norms + 1)):
            block.norm.load_state_dict(getattr(theirs, f"norm{i}").state_dict())


def _copy_encoder_layer(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer):
    _copy_mha(ours.self_attn, theirs.self_attn)
    _copy_ff_norms(ours, theirs, 2)


def _copy_decoder_layer(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer):
    _copy_mha(ours.self_attn, theirs.self_attn)
    _copy_mha(ours.cross_attn, theirs.multihead_attn)
    _copy_ff_norms(ours, theirs, 3)


@pytest.mark.parametrize("kdim", [None, 12])
def test_multihead_attention(kdim):
    theirs = nn.MultiheadAttention(D, H, batch_first=True, kdim=kdim, vdim=kdim).eval()
    ours = MultiHeadAttention(D, H, kdim=kdim, vdim=kdim).eval()
    _copy_mha(ours, theirs)
    x = torch.randn(B, T, D)
    kv = torch.randn(B, S, kdim or D)
    out = ours(x, kv, kv, mask=masks.padding(SRC_LEN), need_weights=True)
    ref, ref_w = theirs(x, kv, kv, key_padding_mask=_kpm(SRC_LEN, S), average_attn_weights=False)
    torch.testing.assert_close(out.out, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.weights, ref_w, atol=1e-5, rtol=0)
    if kdim is None:  # self-attention with a causal mask
        y = torch.randn(B, S, D)
        out = ours(y, mask=masks.causal() & masks.padding(SRC_LEN[[0, 0, 1]]))
        ref, _ = theirs(y, y, y, key_padding_mask=_kpm(SRC_LEN[[0, 0, 1]], S),
                        attn_mask=_causal_bool(S))
        torch.testing.assert_close(out.out, ref, atol=1e-5, rtol=0)


CONFIGS = [(nf, act) for nf in (False, True) for act in ("relu", "gelu")]


def _cfg(norm_first, activation, **kw):
    return TransformerConfig(d_model=D, num_heads=H, d_ff=FF, num_encoder_layers=2, num_decoder_layers=2,
                             dropout=0.0, activation=activation, norm_first=norm_first, positional="none", **kw)


@pytest.mark.parametrize("norm_first, activation", CONFIGS)
def test_encoder_layer(norm_first, activation):
    theirs = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=activation, batch_first=True,
                                        norm_first=norm_first).eval()
    ours = EncoderLayer(_cfg(norm_first, activation)).eval()
    _copy_encoder_layer(ours, theirs)
    x = torch.randn(B, S, D)
    out, _ = ours(x, masks.padding(SRC_LEN))
    ref = theirs(x, src_key_padding_mask=_kpm(SRC_LEN, S))
    real = _kpm(SRC_LEN, S).logical_not()  # torch's fast path may zero padded rows; compare real tokens
    torch.testing.assert_close(out[real], ref[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm_first, activation", CONFIGS)
def test_decoder_layer(norm_first, activation):
    theirs = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, activation=activation, batch_first=True,
                                        norm_first=norm_first).eval()
    ours = DecoderLayer(_cfg(norm_first, activation)).eval()
    _copy_decoder_layer(ours, theirs)
    x, mem = torch.randn(B, T, D), torch.randn(B, S, D)
    out, _, _ = ours(x, mem, self_mask=masks.padding(TGT_LEN), memory_mask=masks.padding(SRC_LEN))
    ref = theirs(x, mem, tgt_mask=_causal_bool(T), tgt_is_causal=True,
                 tgt_key_padding_mask=_kpm(TGT_LEN, T), memory_key_padding_mask=_kpm(SRC_LEN, S))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("norm_first, activation", CONFIGS)
def test_whole_transformer(norm_first, activation):
    theirs = nn.Transformer(D, H, 2, 2, FF, dropout=0.0, activation=activation, batch_first=True,
                            norm_first=norm_first).eval()
    ours = Transformer(_cfg(norm_first, activation, final_norm=True)).eval()  # nn.Transformer always has them
    for o, t in zip(ours.encoder.layers, theirs.encoder.layers):
        _copy_encoder_layer(o, t)
    for o, t in zip(ours.decoder.layers, theirs.decoder.layers):
        _copy_decoder_layer(o, t)
    ours.encoder.norm.load_state_dict(theirs.encoder.norm.state_dict())
    ours.decoder.norm.load_state_dict(theirs.decoder.norm.state_dict())
    src, tgt = torch.randn(B, S, D), torch.randn(B, T, D)
    out = ours(src, tgt, src_mask=masks.padding(SRC_LEN), tgt_mask=masks.padding(TGT_LEN))
    ref = theirs(src, tgt, tgt_mask=_causal_bool(T), tgt_is_causal=True,
                 src_key_padding_mask=_kpm(SRC_LEN, S), tgt_key_padding_mask=_kpm(TGT_LEN, T),
                 memory_key_padding_mask=_kpm(SRC_LEN, S))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
