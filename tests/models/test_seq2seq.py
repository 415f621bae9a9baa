import math

import pytest
import torch

from attnkit.functional.positional import sinusoidal_table
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel, memory_mask_from
from attnkit.nn import TransformerConfig
from attnkit.nn.blocks import FeedForward

pytestmark = pytest.mark.usefixtures("one_thread")

TC = TransformerConfig(d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2, num_decoder_layers=2, dropout=0.0)


def model(**kw):
    cfg = Seq2SeqConfig(kw.pop("src_vocab_size", 30), kw.pop("tgt_vocab_size", 30), kw.pop("transformer", TC), **kw)
    return Seq2SeqModel(cfg).eval()


def test_config_validates_and_round_trips():
    cfg = Seq2SeqConfig(30, 30, TC, share_embeddings=True, decoder_start_token_id=0, final_logits_bias=True)
    assert Seq2SeqConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.start_token_id == 0 and Seq2SeqConfig(30, 30).start_token_id == 1
    with pytest.raises(ValueError, match="share_embeddings"):
        Seq2SeqConfig(30, 31, TC, share_embeddings=True)
    with pytest.raises(ValueError, match="eos_token_id"):
        Seq2SeqConfig(30, 30, TC, eos_token_id=30)
    with pytest.raises(ValueError, match="src_vocab_size"):
        Seq2SeqConfig(0, 30, TC)
    with pytest.raises(ValueError, match="decoder layer"):
        Seq2SeqConfig(30, 30, TC.replace(num_decoder_layers=0))
    with pytest.raises(ValueError, match="unknown keys"):
        Seq2SeqConfig.from_dict({**cfg.to_dict(), "vocab": 3})


def test_shared_embeddings_are_one_tensor_and_save_as_safetensors(tmp_path):
    from safetensors.torch import load_file, save_file

    m = model(share_embeddings=True)
    keys = set(m.state_dict())
    assert "src_embed.weight" in keys and not any(k.startswith(("tgt_embed", "lm_head")) for k in keys)
    assert m.target_embedding is m.src_embed
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(tmp_path / "w.safetensors"))
    assert set(load_file(str(tmp_path / "w.safetensors"))) == keys
    separate = model(share_embeddings=False, tie_output=False)
    assert {"tgt_embed.weight", "lm_head.weight"} <= set(separate.state_dict())
    n_shared = sum(p.numel() for p in m.parameters())
    assert sum(p.numel() for p in separate.parameters()) == n_shared + 2 * 30 * 32


def test_pad_embedding_is_zero_and_embeddings_are_scaled():
    m = model(pad_token_id=0)
    assert m.src_embed.weight[0].abs().sum() == 0
    ids = torch.tensor([[5, 6]])
    x = m.src_embed(ids) * m.embed_scale
    torch.testing.assert_close(x, m.src_embed.weight[ids] * math.sqrt(32))
    assert model(scale_embedding=False).embed_scale == 1.0


def test_incremental_decoding_matches_the_full_pass():
    m = model()
    src = torch.randint(3, 30, (3, 7))
    mask = torch.ones_like(src)
    mask[1, 4:] = 0
    tgt = torch.randint(3, 30, (3, 6))
    memory = m.encode(src, mask)
    full = m.output_logits(m.decode(tgt, memory, mask).last_hidden_state)  # (B, T, V)
    cache = None
    for t in range(tgt.shape[1]):
        step = m.decode_step(tgt[:, t:t + 1], memory, mask, cache)
        cache = step.cache
        torch.testing.assert_close(step.logits, full[:, t], atol=1e-5, rtol=1e-4)
    assert cache[0].cross_kv.static and cache[0].self_kv.length == 6
    torch.testing.assert_close(m(src, mask, tgt), full)


def test_padding_of_the_source_changes_nothing():
    m = model()
    src = torch.randint(3, 30, (1, 5))
    padded = torch.cat((src, torch.zeros(1, 3, dtype=torch.long)), 1)
    mask = torch.tensor([[1] * 5 + [0] * 3])
    tgt = torch.randint(3, 30, (1, 4))
    torch.testing.assert_close(m(padded, mask, tgt), m(src, None, tgt), atol=1e-5, rtol=1e-4)
    left = torch.cat((torch.zeros(1, 3, dtype=torch.long), src), 1)  # left padding: a dense mask
    lmask = torch.tensor([[0] * 3 + [1] * 5])
    assert type(memory_mask_from(lmask, 8)).__name__ == "Dense"
    assert type(memory_mask_from(mask, 8)).__name__ == "Padding"
    assert memory_mask_from(torch.ones(1, 8), 8) is None
    # sinusoidal positions move with the padding, so only the right-padded case is position-exact
    assert m(left, lmask, tgt).shape == (1, 4, 30)


def test_reorder_cache_moves_rows():
    m = model()
    src = torch.randint(3, 30, (2, 5))
    memory = m.encode(src)
    step = m.decode_step(torch.tensor([[1], [1]]), memory, None, None)
    idx = torch.tensor([1, 1, 0])
    moved = m.reorder_cache(step.cache, idx)
    torch.testing.assert_close(moved[0].self_kv.k, step.cache[0].self_kv.k[idx])
    torch.testing.assert_close(moved[1].cross_kv.v, step.cache[1].cross_kv.v[idx])
    kept = m.reorder_cache(step.cache, torch.tensor([1, 0]), cross=False)
    assert kept[0].cross_kv.k is step.cache[0].cross_kv.k


def test_final_logits_bias_is_added_and_saved():
    m = model(final_logits_bias=True)
    assert "final_logits_bias" in m.state_dict()
    h = torch.randn(2, 32)
    base = m.output_logits(h)
    with torch.no_grad():
        m.final_logits_bias[7] = 5.0
    torch.testing.assert_close(m.output_logits(h) - base, torch.nn.functional.one_hot(torch.tensor([7, 7]), 30) * 5.0)


def test_bad_ids_are_named():
    m = model()
    with pytest.raises(ValueError, match="input_ids.*outside the vocabulary"):
        m.encode(torch.tensor([[3, 30]]))
    with pytest.raises(ValueError, match="input_ids"):
        m.encode(torch.tensor([3, 4]))
    with pytest.raises(ValueError, match="attention_mask"):
        m.encode(torch.tensor([[3, 4]]), torch.ones(1, 3))


def test_marian_shaped_options():
    """What Hugging Face Marian checkpoints need: post-LN, SiLU ("swish"), sines-then-cosines positions,
    decoder start = pad, a final logits bias, embeddings scaled by sqrt(d)."""
    tc = TC.replace(activation="silu", sinusoidal_layout="halves", norm_first=False)
    m = model(transformer=tc, pad_token_id=29, decoder_start_token_id=29, eos_token_id=0, final_logits_bias=True,
              share_embeddings=True)
    assert m.config.start_token_id == 29
    x = torch.randn(3, 32)
    ff = m.encoder.layers[0].ff
    torch.testing.assert_close(ff(x), ff.linear2(torch.nn.functional.silu(ff.linear1(x))))
    table = m.encoder.position.table
    pos, j = 7, 3
    w = 10000 ** (-2 * j / 32)
    assert abs(float(table[pos, j]) - math.sin(pos * w)) < 1e-6
    assert abs(float(table[pos, 16 + j]) - math.cos(pos * w)) < 1e-6
    torch.testing.assert_close(sinusoidal_table(5, 8, layout="halves")[:, [0, 4, 1, 5, 2, 6, 3, 7]],
                               sinusoidal_table(5, 8))
    assert isinstance(m.decoder.norm, torch.nn.Identity)  # post-LN stacks end in a LayerNorm already
    out = m.decode_step(torch.tensor([[29]]), m.encode(torch.tensor([[3, 4, 0]])))
    assert out.logits.shape == (1, 30)
    assert FeedForward(8, 16, "silu")._act is torch.nn.functional.silu
    with pytest.raises(ValueError, match="sinusoidal_layout"):
        TransformerConfig(sinusoidal_layout="woven")


def test_forward_at_chosen_positions_only():
    m = model()
    src, tgt = torch.randint(3, 30, (2, 5)), torch.randint(3, 30, (2, 4))
    keep = torch.tensor([[True, True, False, False], [True, True, True, True]])
    torch.testing.assert_close(m(src, None, tgt, positions=keep), m(src, None, tgt)[keep])
