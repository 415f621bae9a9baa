import math
import sys
from types import SimpleNamespace

import pytest
import torch

from attnkit.generation import mask_predict
from attnkit.models.nat import NATConfig, NATModel
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from attnkit.nn import LayerCache, TransformerConfig

pytestmark = pytest.mark.usefixtures("one_thread")

TC = TransformerConfig(d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2, num_decoder_layers=1, dropout=0.0)
V, MASK, PAD, EOS = 12, 1, 0, 2


class Stub:
    """A NAT model whose outputs are set by hand: token ``want[i]`` at position i, with log-probability
    ``conf[i]`` (rest of the mass spread evenly), length classes from ``length_scores``. Records its inputs."""

    def __init__(self, want, conf, length="classifier", length_scores=None, per_length=None):
        self.config = NATConfig(V, V, TC, length=length, max_length_offset=4, max_positions=20)
        self.want, self.conf, self.per_length = want, conf, per_length or {}
        self.length_scores = length_scores
        self.inputs = []

    def encode(self, input_ids, attention_mask=None):
        return torch.zeros(input_ids.shape[0], input_ids.shape[1], 4)

    def length_candidates(self, memory, attention_mask, k):
        order = torch.as_tensor(self.length_scores).argsort(descending=True)[:k]
        return (order - 4 + memory.shape[1]).clamp(1, 20)[None].expand(memory.shape[0], -1)

    def row_lengths(self, attention_mask, memory):
        return torch.full((memory.shape[0],), len(self.want))

    def decode_parallel(self, tokens, memory, memory_mask=None, lengths=None, *, cache=None, use_cache=False):
        self.inputs.append(tokens.clone())
        r, t = tokens.shape
        logits = torch.full((r, t, V), -30.0)
        for row in range(r):
            n = t if lengths is None else int(lengths[row])  # None: every row is full
            bonus = self.per_length.get(n, 0.0)
            for i in range(n):
                p = math.exp(self.conf[i % len(self.conf)] + bonus)
                logits[row, i] = math.log((1 - p) / (V - 1))
                logits[row, i, self.want[i % len(self.want)]] = math.log(p)
        return SimpleNamespace(cache=[LayerCache(None, None)], last_hidden_state=logits)

    def output_logits(self, hidden):
        return hidden


def test_mask_predict_remasks_the_least_confident_tokens_on_schedule():
    want, conf = [5, 6, 7, 8, 9, 10], [-0.1, -2.0, -0.3, -1.5, -0.2, -0.9]
    stub = Stub(want, conf, length_scores=[0, 0, 0, 0, 0, 0, 9, 0, 0])  # class 6 -> T = S + 2 = 6
    out = mask_predict(stub, torch.full((1, 4), 5), iterations=4, length_candidates=1)
    assert out.sequences.tolist() == [[MASK, *want, EOS]] and out.lengths.tolist() == [7]
    masks = [(x == MASK).sum().item() for x in stub.inputs]
    assert masks == [6, 6 * 3 // 4, 6 * 2 // 4, 6 * 1 // 4]  # T (N - t) / N re-masked at iteration t
    order = sorted(range(6), key=lambda i: conf[i])  # least confident first
    for it, n in ((1, 4), (2, 3), (3, 1)):
        assert sorted((stub.inputs[it][0] == MASK).nonzero().view(-1).tolist()) == sorted(order[:n])
    assert out.sequences_scores.item() == pytest.approx(sum(conf) / 6, abs=1e-5)


def test_length_candidates_are_scored_by_mean_log_probability():
    # the classifier prefers T = 5, but the decoder is far more confident at T = 3
    stub = Stub([5, 6, 7, 8, 9], [-0.5] * 5, length_scores=[0, 0, 0, 1, 0, 3, 2, 0, 0], per_length={3: 0.4})
    out = mask_predict(stub, torch.full((2, 4), 5), iterations=2, length_candidates=3)
    assert out.candidate_lengths.tolist() == [[5, 6, 3]] * 2
    assert out.sequences.tolist() == [[MASK, 5, 6, 7, EOS]] * 2
    one = mask_predict(stub, torch.full((1, 4), 5), iterations=2, length_candidates=1)
    assert one.sequences.tolist() == [[MASK, 5, 6, 7, 8, 9, EOS]]


def test_a_row_cut_at_the_first_end():
    stub = Stub([5, 6, EOS, 7, EOS, EOS], [-0.1] * 6, length="end")
    out = mask_predict(stub, torch.full((1, 4), 5), iterations=3)
    assert out.sequences.tolist() == [[MASK, 5, 6, EOS]] and out.lengths.tolist() == [3]
    with pytest.raises(ValueError, match="length classifier"):
        mask_predict(stub, torch.full((1, 4), 5), length_candidates=2)


def test_batched_decoding_equals_one_sentence_at_a_time():
    torch.manual_seed(1)
    for length in ("classifier", "end"):
        model = NATModel(NATConfig(30, 30, TC, share_embeddings=True, max_positions=30, length=length),
                         dtype=torch.float64).eval()
        with torch.no_grad():  # a length classifier that spreads its candidates
            if model.length_head is not None:
                model.length_head.weight.normal_(std=2.0)
        ids = torch.randint(4, 30, (3, 7))
        mask = torch.ones_like(ids)
        ids[1, 4:], mask[1, 4:] = 0, 0
        ids[2, 2:], mask[2, 2:] = 0, 0
        k = 3 if length == "classifier" else 1
        batch = mask_predict(model, ids, mask, iterations=4, length_candidates=k)
        for i in range(3):
            n = int(mask[i].sum())
            alone = mask_predict(model, ids[i:i + 1, :n], mask[i:i + 1, :n], iterations=4, length_candidates=k)
            width = int(alone.lengths[0]) + 1
            assert batch.sequences[i, :width].tolist() == alone.sequences[0, :width].tolist()
            assert (batch.sequences[i, width:] == PAD).all()
            assert batch.sequences_scores[i].item() == pytest.approx(alone.sequences_scores[0].item(), abs=1e-9)


def test_bad_arguments_are_clear_errors():
    ar = Seq2SeqModel(Seq2SeqConfig(30, 30, TC)).eval()
    with pytest.raises(ValueError, match="not a non-autoregressive model.*generate"):
        mask_predict(ar, torch.randint(4, 30, (1, 5)))
    stub = Stub([5], [-0.1], length_scores=[1] * 9)
    for kw, match in ((dict(iterations=0), "iterations"), (dict(length_candidates=0), "length_candidates")):
        with pytest.raises(ValueError, match=match):
            mask_predict(stub, torch.full((1, 4), 5), **kw)
    with pytest.raises(ValueError, match="input_ids"):
        mask_predict(stub, torch.full((4,), 5))


def test_the_output_layer_in_chunks_of_rows_gives_every_row_its_own_choice(monkeypatch):
    """``best_of_hidden`` over chunks of 2 rows (CHUNK_LOGITS = 2 V): each chunk through the output layer on its own,
    the same tokens and log-probabilities as all rows at once."""
    mp = sys.modules["attnkit.generation.mask_predict"]
    torch.manual_seed(2)
    model = NATModel(NATConfig(30, 30, TC, share_embeddings=True, max_positions=30), dtype=torch.float64).eval()
    hidden, bad = torch.randn(7, 32, dtype=torch.float64), torch.tensor([0, 1, 2])
    rows = []
    output_logits = model.output_logits
    monkeypatch.setattr(model, "output_logits", lambda h: rows.append(h.shape[0]) or output_logits(h))
    with torch.no_grad():
        whole = mp.best_of_hidden(model, hidden, bad)
        monkeypatch.setattr(mp, "CHUNK_LOGITS", 2 * 30)
        logp, ids = mp.best_of_hidden(model, hidden, bad)
    assert rows == [7, 2, 2, 2, 1] and torch.equal(ids, whole[1])
    torch.testing.assert_close(logp, whole[0], atol=1e-12, rtol=1e-12)  # a product of 2 rows may round otherwise
    assert ids.shape == (7,) and not torch.isin(ids, bad).any()
