"""The weight spec and its tables: every architecture's model read into a spec and written back tensor for tensor,
shared and tied tables as one tensor, Marian's and BERT's tables covering every spec name, and the refusals."""

import pytest
import torch

from attnkit.inference import Unsupported, model_state, spec_of, spec_tensors
from attnkit.inference.architectures import architecture_of
from attnkit.inference.spec import layer_names
from attnkit.models.bert import BertConfig, BertModel
from attnkit.models.nat import NATConfig, NATModel
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from attnkit.nn import TransformerConfig
from attnkit.pretrained import bert_layout
from attnkit.pretrained.marian.layout import name_pairs

TC = TransformerConfig(d_model=32, num_heads=2, d_ff=48, num_encoder_layers=2, num_decoder_layers=3, max_len=64)


def models():
    torch.manual_seed(0)
    return [Seq2SeqModel(Seq2SeqConfig(30, 30, TC, share_embeddings=True, final_logits_bias=True)),
            Seq2SeqModel(Seq2SeqConfig(30, 40, TC.replace(positional="learned"), tie_output=False)),
            NATModel(NATConfig(30, 30, TC.replace(norm_first=True), share_embeddings=True, max_length_offset=4)),
            BertModel(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=32, max_position_embeddings=12))]


@pytest.mark.parametrize("index", range(4))
def test_a_model_goes_to_its_spec_and_back_tensor_for_tensor(index):
    model = models()[index]
    tensors = spec_tensors(model)
    fresh = type(model)(model.config)
    state = model_state(tensors, fresh)
    assert set(state) == set(fresh.state_dict())  # every tensor the model holds has a spec name
    for name, t in model.state_dict().items():
        assert torch.equal(state[name], t), name


def test_the_spec_reads_roles_and_settings():
    shared, untied, nat, bert = models()
    s = spec_of(shared)
    assert s.shares_tables and s.output.weight is s.target_embedding and s.output.bias.shape == (30,)
    assert len(s.encoder.layers) == 2 and len(s.decoder.layers) == 3 and s.decoder.layers[0].cross is not None
    assert s.encoder.layers[0].cross is None and s.encoder.norm is None and s.encoder.positions.kind == "sinusoidal"
    assert s.settings.embed_scale == 32 ** 0.5 and s.settings.head_dim == 16 and not s.settings.norm_first
    u = spec_of(untied)
    assert not u.shares_tables and u.output.weight.shape == (40, 32) and u.output.bias is None
    assert u.decoder.positions.kind == "learned" and u.decoder.positions.table.shape == (64, 32)
    n = spec_of(nat)
    assert n.settings.architecture == "nat" and n.length.weight.shape == (9, 32) and n.encoder.norm is not None
    b = spec_of(bert, torch.bfloat16)
    assert b.token_types.dtype == torch.bfloat16 and b.pooler is not None and b.embedding_norm.affine
    assert next(bert.parameters()).dtype == torch.float32  # the model is not changed


def test_marians_table_covers_every_per_layer_spec_name():
    cfg = Seq2SeqConfig(30, 30, TC)
    want = {n for i in range(2) for n in layer_names("encoder", i, False)}
    want |= {n for i in range(3) for n in layer_names("decoder", i, True)}
    assert {spec for spec, _ in name_pairs(cfg)} == want


def test_berts_table_covers_every_spec_name_of_a_bert_model():
    for pooler in (True, False):
        cfg = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=32, max_position_embeddings=12, with_pooler=pooler)
        assert {spec for spec, _ in bert_layout.name_pairs(cfg)} == set(spec_tensors(BertModel(cfg)))


def test_models_without_a_table_or_that_no_engine_runs_are_unsupported():
    with pytest.raises(Unsupported, match="no weight spec for a Linear"):
        architecture_of(torch.nn.Linear(2, 2))
    rope = Seq2SeqModel(Seq2SeqConfig(30, 30, TC.replace(positional="rope")))
    with pytest.raises(Unsupported, match="positions inside attention"):
        spec_of(rope)
    with pytest.raises(Unsupported, match="without biases"):
        spec_of(Seq2SeqModel(Seq2SeqConfig(30, 30, TC.replace(bias=False))))
