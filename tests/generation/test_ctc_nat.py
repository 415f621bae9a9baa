"""ctc_decode: the one-pass decoding of a CTC-trained NAT model collapses each row (repeats merged, blanks
dropped) into generate's layout; the row is ctc_upsample x the source; wrong models and arguments are refused."""

import sys

import pytest
import torch
from torch import Tensor

from attnkit.generation import mask_predict
from attnkit.generation.ctc import collapse
from attnkit.generation.ctc_nat import ctc_decode
from attnkit.models.nat import NATConfig, NATModel, ctc_row_lengths
from attnkit.nn import TransformerConfig
from attnkit.nn.transformer import DecoderOutput

TC = TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=1, dropout=0.0)
V = 12


class Scripted:
    """The decoding protocol with fixed outputs: position t of sentence b writes ``labels[b][t]`` (the memory of
    sentence b holds b). Records the decoder's inputs (tokens, lengths) of each call."""

    def __init__(self, labels: list[list[int]], **kw):
        self.config = NATConfig(V, V, TC, nat_loss="ctc", **kw)
        self.labels, self.seen = labels, []

    def encode(self, input_ids: Tensor, attention_mask=None) -> Tensor:
        return torch.arange(input_ids.shape[0], dtype=torch.float)[:, None, None].expand(*input_ids.shape, 8)

    def decode_parallel(self, tokens, memory, memory_mask=None, lengths=None, **kw) -> DecoderOutput:
        self.seen.append((tokens.clone(), lengths))
        b, w = tokens.shape
        hidden = torch.zeros(b, w, V)  # the "hidden state" is the logits here
        for i, sentence in enumerate(memory[:, 0, 0].long().tolist()):
            for t, c in enumerate(self.labels[sentence][:w]):
                hidden[i, t, c] = 5.0
        return DecoderOutput(hidden, None, None, None)

    def output_logits(self, hidden: Tensor) -> Tensor:
        return hidden


def test_rows_collapse_into_generate_layout():
    # row 0: 5 5 _ 5 6 6 _ _ -> 5 5 6; row 1 (a source of 2 tokens, a row of 4): 7 _ 7 7 -> 7 7
    m = Scripted([[5, 5, 0, 5, 6, 6, 0, 0], [7, 0, 7, 7, 9, 9, 9, 9]])
    ids = torch.tensor([[4, 5, 6, 2], [4, 2, 0, 0]])
    out = ctc_decode(m, ids, (ids != 0).long())
    assert out.sequences.tolist() == [[1, 5, 5, 6, 2], [1, 7, 7, 2, 0]]
    assert out.lengths.tolist() == [4, 3] and out.candidate_lengths.tolist() == [[8], [4]]
    (tokens, lengths), = m.seen
    assert tokens.tolist() == [[1] * 8, [1] * 4 + [0] * 4] and lengths.tolist() == [8, 4]  # mask tokens, padding
    # every position's best label has the same log-probability here: the mean is that
    want = 5.0 - torch.logsumexp(torch.tensor([5.0] + [0.0] * (V - 1)), 0)
    torch.testing.assert_close(out.sequences_scores, torch.full((2,), float(want)))


def test_an_unpadded_batch_takes_no_lengths_and_suppressed_tokens_are_not_written():
    m = Scripted([[3, 3, 0, 8, 8, 8]], ctc_upsample=3)
    out = ctc_decode(m, torch.tensor([[4, 2]]), torch.ones(1, 2, dtype=torch.long))
    assert m.seen[0][1] is None and out.sequences.tolist() == [[1, 3, 8, 2]]
    out = ctc_decode(m, torch.tensor([[4, 2]]), suppress_tokens=[3])  # 3 suppressed: the next best, 0 (blank)
    assert out.sequences.tolist() == [[1, 8, 2]]
    empty = ctc_decode(Scripted([[0, 0, 0, 0]]), torch.tensor([[4, 2]]))
    assert empty.sequences.tolist() == [[1, 2]] and empty.lengths.tolist() == [1]


def test_a_blank_penalty_lowers_the_blanks_logit_before_the_choice():
    """Labels 5 _ 6 _ with logit 5 each and 0 elsewhere: a penalty below 5 keeps the blanks; above it, each
    blank position writes the best other token (3: the first of the zeros that is not the mask or END)."""
    ids = torch.tensor([[4, 2]])  # a row of 4
    for penalty, want in ((0.0, [1, 5, 6, 2]), (4.9, [1, 5, 6, 2]), (6.0, [1, 5, 3, 6, 3, 2]),
                          (-3.0, [1, 5, 6, 2])):
        assert ctc_decode(Scripted([[5, 0, 6, 0]]), ids, blank_penalty=penalty).sequences.tolist() == [want], penalty
    for bad in (float("nan"), float("inf"), 101.0, "1"):
        with pytest.raises(ValueError, match="ctc_decode: `blank_penalty` must be"):
            ctc_decode(Scripted([[5, 0, 6, 0]]), ids, blank_penalty=bad)


def test_wrong_models_and_arguments_are_refused():
    ctc = NATModel(NATConfig(V, V, TC, nat_loss="ctc")).eval()
    ids = torch.tensor([[4, 5, 2]])
    with pytest.raises(ValueError, match="trained with CTC .*ctc_decode"):
        mask_predict(ctc, ids)
    with pytest.raises(ValueError, match="not a NAT model trained with CTC"):
        ctc_decode(NATModel(NATConfig(V, V, TC)).eval(), ids)
    with pytest.raises(ValueError, match="`suppress_tokens`"):
        ctc_decode(ctc, ids, suppress_tokens=[0])  # the blank
    with pytest.raises(ValueError, match="`input_ids`"):
        ctc_decode(ctc, ids.float())
    with pytest.raises(ValueError, match="`attention_mask`"):
        ctc_decode(ctc, ids, torch.ones(1, 2))


@pytest.mark.parametrize("list_up_to", [0, 256])  # the whole batch at once, or row by row as lists
def test_the_batch_collapses_as_each_row_alone(list_up_to, monkeypatch):
    """Random rows of labels (repeats, blanks, rows of every length, one of only blanks): the batch's collapse and
    layout are ``ctc.collapse`` row by row, and only each row's positions reach the output layer."""
    monkeypatch.setattr(sys.modules["attnkit.generation.ctc_nat"], "LIST_UP_TO", list_up_to)
    g = torch.Generator().manual_seed(0)
    s = torch.tensor([7, 1, 4, 7, 3, 2])  # source lengths: rows of 2 S positions
    labels = torch.randint(3, 7, (6, 14), generator=g) * torch.randint(0, 2, (6, 14), generator=g)  # ~half blank
    labels[2] = 0
    m = Scripted(labels.tolist())
    seen = []
    output_logits = m.output_logits
    m.output_logits = lambda h: seen.append(h.shape[0]) or output_logits(h)
    ids = (torch.arange(7)[None] < s[:, None]).long() * 4  # (6, 7): 4 = a source token, 0 padding
    out = ctc_decode(m, ids, (ids != 0).long())
    assert sum(seen) == int(2 * s.sum())  # 48 positions, not 6 x 14
    assert len(m.seen) == 1 and m.seen[0][1].tolist() == (2 * s).tolist()  # 5 source lengths: one padded pass
    for b in range(6):
        want = collapse(labels[b, :2 * int(s[b])], 0)
        row = out.sequences[b].tolist()
        assert row[:len(want) + 2] == [1, *want, 2] and set(row[len(want) + 2:]) <= {0}
        assert int(out.lengths[b]) == len(want) + 1
    assert out.sequences.shape[1] == max(len(collapse(labels[b, :2 * int(s[b])], 0)) for b in range(6)) + 2
    assert out.lengths[2] == 1 and out.sequences[2, :2].tolist() == [1, 2]  # only blanks: END alone


def test_an_unpadded_batch_has_the_rows_of_ctc_row_lengths():
    for s in (1, 3, 40):  # 3 S past the longest row the model writes for S = 40
        m = Scripted([[5] * 200] * 2, ctc_upsample=3, max_positions=64)
        out = ctc_decode(m, torch.full((2, s), 4))
        want = ctc_row_lengths(torch.tensor([s, s]), m.config)
        assert out.candidate_lengths[:, 0].tolist() == want.tolist() and m.seen[0][0].shape == (2, int(want[0]))
    assert int(want[0]) == m.config.max_target_length < 120
    for s, pad in ((5, 0), (5, 2)):  # ratio 1.5: 8 positions for 5 tokens, 5 (ceil 4.5) for the padded row's 3
        m = Scripted([[5] * 200] * 2, ctc_upsample=1.5, max_positions=64)
        mask = torch.ones(2, s, dtype=torch.long)
        mask[1, s - pad:] = 0
        out = ctc_decode(m, torch.full((2, s), 4), mask if pad else None)
        assert out.candidate_lengths[:, 0].tolist() == [8, 8 if not pad else 5] and m.seen[0][0].shape == (2, 8)
