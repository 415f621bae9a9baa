import pytest
import torch

from attnkit import masks
from attnkit.models.bert import BertConfig, BertModel

TINY = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                  max_position_embeddings=20, type_vocab_size=2)


def test_config_validation():
    with pytest.raises(ValueError, match="divisible"):
        BertConfig(hidden_size=10, num_attention_heads=3)
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig(hidden_act="swish")
    with pytest.raises(ValueError, match="num_hidden_layers"):
        BertConfig(num_hidden_layers=0)


def test_from_hf_reads_fields_and_rejects_other_architectures():
    c = BertConfig.from_hf({"model_type": "bert", "vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 2,
                            "num_attention_heads": 4, "intermediate_size": 32, "layer_norm_eps": 1e-7,
                            "hidden_act": "gelu_new", "pad_token_id": None})
    enc = c.encoder_config()
    assert (enc.positional, enc.activation, enc.layer_norm_eps, enc.dropout, enc.norm_first) == \
        ("none", "gelu_tanh", 1e-7, 0.0, False)
    assert c.pad_token_id == 0 and enc.final_norm is False
    with pytest.raises(ValueError, match=r"my/config.json: unknown architecture: model_type 'gpt2'"):
        BertConfig.from_hf({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}, source="my/config.json")
    with pytest.raises(ValueError, match="missing keys"):
        BertConfig.from_hf({"model_type": "bert", "vocab_size": 5})
    with pytest.raises(ValueError, match="position_embedding_type"):
        BertConfig.from_hf({"model_type": "bert", "position_embedding_type": "relative_key"})


def test_forward_shapes_and_padding():
    model = BertModel(TINY).eval()
    ids = torch.randint(1, 50, (3, 7))
    lengths = torch.tensor([7, 4, 2])
    with torch.no_grad():
        out = model(ids, lengths=lengths, need_weights=True, output_hidden_states=True)
        alone = model(ids[1:2, :4])
        same = model(ids, mask=masks.padding(lengths))
    assert out.last_hidden_state.shape == (3, 7, 16) and out.pooler_output.shape == (3, 16)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2 and out.attentions[0].shape == (3, 4, 7, 7)
    assert float(out.attentions[0][1, :, :, 4:].abs().max()) == 0.0  # padded keys get no weight
    torch.testing.assert_close(out.last_hidden_state[1, :4], alone.last_hidden_state[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(out.last_hidden_state, same.last_hidden_state, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.hidden_states[-1], out.last_hidden_state)


def test_no_padding_runs_without_mask_and_matches_dense_mask():
    model = BertModel(TINY).eval()
    ids = torch.randint(1, 50, (2, 5))
    with torch.no_grad():
        a = model(ids, lengths=torch.tensor([5, 5])).last_hidden_state
        b = model(ids, mask=torch.ones(2, 5, 5, dtype=torch.bool)).last_hidden_state
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_bad_inputs():
    model = BertModel(TINY.__class__(**{**TINY.__dict__, "with_pooler": False}))
    assert model.pooler is None
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 20"):
        model(torch.zeros(1, 21, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids"):
        model(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="lengths"):
        model(torch.zeros(2, 3, dtype=torch.long), lengths=torch.tensor([3]))


def test_set_dropout_reaches_every_site_and_validates():
    from attnkit.models.bert import set_dropout

    model = BertModel(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=32, max_position_embeddings=10))
    ids = torch.randint(1, 30, (2, 7))
    model.train()
    a, b = model(ids).last_hidden_state, model(ids).last_hidden_state
    torch.testing.assert_close(a, b)  # loaded models start without dropout
    set_dropout(model, 0.3, 0.2)
    assert model.embeddings.dropout.p == 0.3 and all(layer.self_attn.dropout == 0.2 for layer in model.encoder.layers)
    assert all(layer.ff_block.dropout.p == 0.3 for layer in model.encoder.layers)
    assert not torch.allclose(model(ids).last_hidden_state, model(ids).last_hidden_state)
    model.eval()
    torch.testing.assert_close(model(ids).last_hidden_state, model(ids).last_hidden_state)
    with pytest.raises(ValueError, match="hidden"):
        set_dropout(model, 1.0, 0.1)


def test_packed_sequences_equal_padded_ones():
    """Texts end to end with a segments mask and per-text positions give each text's padded result."""
    model = BertModel(TINY).eval()
    lengths = torch.tensor([7, 3, 1, 5])
    padded = torch.randint(1, 50, (4, 7)) * masks.keep_positions(lengths, 7)  # pad id 0 past each length
    keep = masks.keep_positions(lengths, 7)
    positions = torch.cat([torch.arange(int(n)) for n in lengths])[None]
    with torch.no_grad():
        want = model(padded, lengths=lengths, pool=False).last_hidden_state[keep]  # (T, d)
        got = model(padded[keep][None], mask=masks.segments(lengths), position_ids=positions,
                    pool=False).last_hidden_state[0]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_position_ids_checked():
    model = BertModel(TINY).eval()
    ids = torch.randint(1, 50, (1, 5))
    with pytest.raises(ValueError, match="`position_ids` must have the shape of `input_ids`"):
        model(ids, position_ids=torch.arange(4)[None])
    with pytest.raises(ValueError, match=r"`position_ids` must lie in \[0, 20\)"):
        model(ids, position_ids=torch.tensor([[0, 1, 2, 3, 20]]))
