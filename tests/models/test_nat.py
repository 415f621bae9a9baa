import pytest
import torch

from attnkit.generation import generate
from attnkit.models.nat import NATConfig, NATModel, is_nat, length_classes, random_mask, row_lengths_for
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from attnkit.nn import TransformerConfig

pytestmark = pytest.mark.usefixtures("one_thread")

TC = TransformerConfig(d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2, num_decoder_layers=2, dropout=0.0)


def nat(**kw) -> NATModel:
    cfg = NATConfig(30, 30, TC, share_embeddings=True, max_positions=40, **kw)
    return NATModel(cfg, dtype=torch.float64).eval()


def test_config_validates_and_round_trips():
    cfg = NATConfig(30, 30, TC, length="end", row_ratio=2.0, row_extra=3, length_loss_weight=0.5)
    assert NATConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.mask_id == cfg.bos_token_id == 1 and NATConfig(30, 30, TC, mask_token_id=5).mask_id == 5
    assert isinstance(cfg, Seq2SeqConfig)
    for bad, match in ((dict(length="ctc"), "length"), (dict(mask_token_id=0), "mask_token_id"),
                       (dict(mask_token_id=2), "mask_token_id"), (dict(mask_token_id=30), "mask_token_id"),
                       (dict(max_length_offset=-1), "max_length_offset"), (dict(row_ratio=0.0), "row_ratio"),
                       (dict(length_loss_weight=-0.1), "length_loss_weight"), (dict(eos_token_id=30), "eos_token_id")):
        with pytest.raises(ValueError, match=match):
            NATConfig(30, 30, TC, **bad)
    with pytest.raises(ValueError, match="NATConfig"):
        NATModel(Seq2SeqConfig(30, 30, TC))


def test_length_helpers():
    assert length_classes(torch.tensor([5, 9, 40, 0]), torch.tensor([7, 7, 7, 7]), 4).tolist() == [2, 6, 8, 0]
    cfg = NATConfig(30, 30, TC, length="end", row_ratio=1.5, row_extra=2, max_positions=20)
    assert row_lengths_for(torch.tensor([1, 4, 5, 30]), cfg).tolist() == [4, 8, 10, 20]
    m = nat(max_length_offset=3)
    assert m.length_head.out_features == 7 and nat(length="end").length_head is None
    memory = torch.randn(2, 5, 32, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    cands = m.length_candidates(memory, mask, k=3)
    order = m.length_logits(memory, mask).topk(3, dim=1).indices  # best offset classes first
    assert torch.equal(cands, (torch.tensor([[5], [2]]) + order - 3).clamp(1, 40))
    with pytest.raises(ValueError, match="no length classifier"):
        nat(length="end").length_logits(memory, mask)


def test_random_mask_counts_are_uniform_and_never_touch_padding():
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([1, 4, 7, 0]).repeat(3000)
    masked = random_mask(lengths, 8, g)  # (12000, 8)
    counts = masked.sum(1).view(3000, 4)
    assert not masked[:, 7].any() and not masked.view(3000, 4, 8)[:, 1, 4:].any()  # never past a row's length
    assert counts[:, 0].eq(1).all() and counts[:, 3].eq(0).all()
    for col, length in ((1, 4), (2, 7)):
        c = counts[:, col]
        assert int(c.min()) == 1 and int(c.max()) == length
        freq = torch.bincount(c, minlength=length + 1)[1:].float() / 3000  # each count about 1 / length
        assert (freq - 1 / length).abs().max() < 0.035
    # which positions are masked is uniform too: every position of the 7-long rows about half the time
    pos = masked.view(3000, 4, 8)[:, 2, :7].float().mean(0)
    assert (pos - 4 / 7).abs().max() < 0.04


def test_self_attention_is_unmasked_and_padding_is_hidden():
    m = nat()

    def decode(tokens, memory, mask, lengths=None):
        return m.output_logits(m.decode_parallel(tokens, memory, mask, lengths).last_hidden_state)

    src, mask = torch.randint(4, 30, (1, 6)), torch.ones(1, 6, dtype=torch.long)
    memory = m.encode(src, mask)
    tokens = torch.randint(4, 30, (1, 5))
    a = decode(tokens, memory, mask)
    later = tokens.clone()
    later[0, 4] = (later[0, 4] + 1 - 4) % 26 + 4  # change the last token only
    b = decode(later, memory, mask)
    assert (a[0, 0] - b[0, 0]).abs().max() > 1e-6  # the first position sees the last: no causal mask
    # positions past the row's length never influence the real ones
    padded = torch.cat((tokens, torch.randint(4, 30, (1, 3))), dim=1)
    c = decode(padded, memory, mask, torch.tensor([5]))
    torch.testing.assert_close(c[:, :5], a, rtol=0, atol=1e-12)
    # a batch of rows of different lengths equals each row on its own
    rows = torch.randint(4, 30, (2, 6))
    both = decode(rows, memory.expand(2, -1, -1), mask.expand(2, -1), torch.tensor([6, 3]))
    torch.testing.assert_close(both[1, :3], decode(rows[1:, :3], memory, mask)[0], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="lengths"):
        m.decode_parallel(rows, memory.expand(2, -1, -1), mask.expand(2, -1), torch.tensor([7, 3]))


def test_forward_gives_token_and_length_logits():
    m = nat(max_length_offset=4)
    src = torch.randint(4, 30, (3, 6))
    logits, length_logits = m(src, torch.ones(3, 6, dtype=torch.long), torch.randint(1, 30, (3, 5)),
                              torch.tensor([5, 4, 2]))
    assert logits.shape == (3, 5, 30) and length_logits.shape == (3, 9)
    picked = torch.rand(3, 5) < 0.5  # logits of some positions only: the same numbers
    tokens = torch.randint(1, 30, (3, 5))
    full = m(src, None, tokens, torch.tensor([5, 4, 2]))[0]
    torch.testing.assert_close(m(src, None, tokens, torch.tensor([5, 4, 2]), picked)[0], full[picked])
    assert nat(length="end")(src, None, torch.randint(1, 30, (3, 5)))[1] is None


def test_autoregressive_decoding_of_a_nat_model_is_a_clear_error():
    m = nat()
    assert is_nat(m) and not is_nat(Seq2SeqModel(Seq2SeqConfig(30, 30, TC)))
    with pytest.raises(ValueError, match="non-autoregressive.*mask_predict"):
        generate(m, torch.randint(4, 30, (1, 5)), max_new_tokens=4)
