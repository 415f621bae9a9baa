"""Glancing training and CTC for the NAT decoder (models/nat_losses.py): the reveal count, the positions scored,
which targets a row can align, the most likely alignment, and a CTC model that learns a copy task."""

import random

import pytest
import torch
import torch.nn.functional as F

from attnkit.generation.ctc import collapse
from attnkit.generation.ctc_nat import ctc_decode
from attnkit.models.nat import NATConfig, NATModel, ctc_row_length, ctc_row_lengths
from attnkit.models.nat_losses import IGNORE, best_path, ctc_feasible, glance_reveal, glat_logits
from attnkit.nn import TransformerConfig
from attnkit.tasks.translate_nat import collate, forward

pytestmark = pytest.mark.usefixtures("one_thread")

TC = TransformerConfig(d_model=32, num_heads=2, d_ff=64, num_encoder_layers=1, num_decoder_layers=1, dropout=0.0,
                       norm_first=True)


def test_config_fields_round_trip_and_old_runs_read_as_mask_predict():
    cfg = NATConfig(30, 30, TC, nat_loss="glat", glat_ratio=0.3)
    assert NATConfig.from_dict(cfg.to_dict()) == cfg and cfg.to_dict()["nat_loss"] == "glat"
    old = {k: v for k, v in NATConfig(30, 30, TC).to_dict().items() if k not in ("nat_loss", "glat_ratio",
                                                                                  "ctc_upsample")}
    assert NATConfig.from_dict(old).nat_loss == "mask-predict"
    ctc = NATConfig(30, 30, TC, nat_loss="ctc", ctc_upsample=3)
    assert NATModel(ctc).length_head is None and ctc.blank_id == ctc.pad_token_id == 0
    assert NATModel(cfg).length_head is not None
    for bad, match in ((dict(nat_loss="ctcx"), "`nat_loss` must be one of"), (dict(glat_ratio=1.5), "`glat_ratio`"),
                       (dict(glat_ratio=float("nan")), "`glat_ratio`"), (dict(ctc_upsample=0), "`ctc_upsample`"),
                       (dict(nat_loss="ctc", length="end"), "`length` must be left at 'classifier'")):
        with pytest.raises(ValueError, match=match):
            NATConfig(30, 30, TC, **bad)


def test_glancing_reveals_ratio_times_the_wrong_positions():
    rows = torch.tensor([[5, 6, 7, 8, 9, 0], [5, 6, 7, 0, 0, 0], [4, 4, 4, 4, 0, 0]])
    predicted = torch.tensor([[5, 9, 9, 9, 3, 7], [5, 6, 7, 9, 9, 9], [4, 5, 5, 5, 4, 4]])  # past the rows: ignored
    lengths = torch.tensor([5, 3, 4])
    g = torch.Generator().manual_seed(0)
    for ratio, want in ((0.5, [2, 0, 1]), (1.0, [4, 0, 3]), (0.0, [0, 0, 0]), (0.3, [1, 0, 0])):
        revealed = glance_reveal(predicted, rows, lengths, ratio, g)
        assert revealed.sum(1).tolist() == want
        assert not (revealed & ~(torch.arange(6) < lengths[:, None])).any()  # never past a row
    # every position of a row is revealed about as often
    counts = sum(glance_reveal(predicted, rows, lengths, 0.5, g)[0].long() for _ in range(2000))
    assert int(counts[5]) == 0 and all(abs(int(c) / 2000 - 0.4) < 0.05 for c in counts[:5])


def test_glat_scores_only_the_positions_left_masked():
    torch.manual_seed(0)
    model = NATModel(NATConfig(20, 20, TC, share_embeddings=True, max_positions=24, nat_loss="glat",
                               glat_ratio=0.5)).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    mask = (src != 0).long()
    rows = torch.tensor([[6, 7, 8, 9, 10], [9, 10, 11, 0, 0]])
    lengths = torch.tensor([5, 3])
    memory = model.encode(src, mask)
    first = model.decode_parallel(rows.masked_fill(rows != 0, 1), memory, mask, lengths).last_hidden_state
    wrong = ((model.output_logits(first).argmax(-1) != rows) & (rows != 0)).sum(1)
    logits, masked, _ = glat_logits(model, src, mask, rows, lengths, 0.5, torch.Generator().manual_seed(1))
    assert masked.sum(1).tolist() == (lengths - wrong // 2).tolist()
    assert logits.shape == (int(masked.sum()), 20) and not (masked & (rows == 0)).any()
    # the task's loss: targets are the reference at those positions, plus the length loss
    out = forward(model, (src, mask, rows, lengths), model.config)  # dev: the generator seeded 0
    _, masked, _ = glat_logits(model, src, mask, rows, lengths, 0.5, torch.Generator().manual_seed(0))
    assert len(out) == 3 and torch.equal(out[1], rows[masked]) and out[0].shape == (int(masked.sum()), 20)
    _, masked0, _ = glat_logits(model, src, mask, rows, lengths, 0.0)
    assert torch.equal(masked0, rows != 0)  # ratio 0: every position predicted, as one pass


def test_which_targets_a_row_can_align():
    targets = torch.tensor([[5, 5, 6], [5, 6, 7], [4, 4, 0], [0, 0, 0]])
    lengths = torch.tensor([3, 3, 2, 0])
    assert ctc_feasible(targets, lengths, torch.tensor([3, 3, 3, 1])).tolist() == [False, True, True, True]
    assert ctc_feasible(targets, lengths, torch.tensor([4, 2, 2, 1])).tolist() == [True, False, False, True]
    cfg = NATConfig(30, 30, TC, nat_loss="ctc", ctc_upsample=3, max_positions=10)
    assert ctc_row_lengths(torch.tensor([1, 3, 4]), cfg).tolist() == [3, 9, 10]


def test_a_fractional_upsample_rounds_the_row_up_exactly():
    s = torch.arange(0, 60)
    for r, want in ((1.5, [0, 2, 3, 5, 6, 8]), (1.1, [0, 2, 3, 4, 5, 6]), (1.25, [0, 2, 3, 4, 5, 7])):
        cfg = NATConfig(30, 30, TC, nat_loss="ctc", ctc_upsample=r, max_positions=64)
        rows = ctc_row_lengths(s, cfg)
        assert rows[:6].tolist() == [max(w, 1) for w in want]  # ceil(r S), at least 1
        assert rows[10].item() == {1.5: 15, 1.1: 11, 1.25: 13}[r]  # 1.1 x 10 is 11 (a float product ceils to 12)
        assert [ctc_row_length(int(n), cfg) for n in s] == rows.tolist()
        assert bool((rows[1:] >= rows[:-1]).all()) and rows.max().item() == 64


def test_best_path_is_the_most_likely_alignment():
    v, blank = 8, 0
    frames = [5, 0, 6, 6, 6, 0]  # the best class of each position
    logp = torch.full((2, 6, v), -5.0)
    for t, c in enumerate(frames):
        logp[0, t, c] = -0.1
    logp[1] = logp[0]
    targets = torch.tensor([[5, 6], [5, 5]])
    labels = best_path(logp.log_softmax(-1), torch.tensor([6, 6]), targets, torch.tensor([2, 2]), blank)
    assert labels[0].tolist() == frames
    assert collapse(labels[1], blank) == [5, 5] and labels[1, :2].tolist() == [5, 0]  # 5 _ 5: a blank between
    cut = best_path(logp.log_softmax(-1), torch.tensor([4, 1]), targets, torch.tensor([2, 2]), blank)
    assert cut[0].tolist() == [5, 0, 6, 6, IGNORE, IGNORE]  # a row of 4 positions
    assert cut[1].tolist() == [IGNORE] * 6  # 5 5 cannot fit one position


def test_ctc_learns_a_copy_task_and_decodes_by_collapsing():
    """Targets are the source ids + 1 (3..7 tokens, repeats allowed): the CTC loss is finite and falls, and the
    one pass then writes most training targets exactly, the length from the alignment."""
    rng, v = random.Random(0), 16
    pairs = []
    for _ in range(48):
        s = [rng.randint(4, v - 2) for _ in range(rng.randint(3, 7))]
        pairs.append((torch.tensor(s + [2]), torch.tensor([x + 1 for x in s])))
    torch.manual_seed(0)
    cfg = NATConfig(v, v, TC, share_embeddings=True, max_positions=24, nat_loss="ctc", ctc_upsample=2)
    model = NATModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(200):
        batch = collate([pairs[i] for i in rng.sample(range(48), 16)], cfg)
        zeros, labels, loss = forward(model, batch, cfg)
        assert float(F.cross_entropy(zeros, labels)) == 0 and zeros.shape == (int(batch[3].sum()), 1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-20:]) / 20 < 0.25 * sum(losses[:20]) / 20
    model.eval()
    src = torch.nn.utils.rnn.pad_sequence([p[0] for p in pairs], batch_first=True)
    out = ctc_decode(model, src, (src != 0).long())
    want = [[1, *p[1].tolist(), 2] for p in pairs]
    got = [out.sequences[i, :len(w)].tolist() for i, w in enumerate(want)]
    assert sum(g == w for g, w in zip(got, want)) >= 40  # of 48
    # dev: the row positions' labels on the most likely alignment, scored as cross-entropy
    logp, labels = forward(model, collate(pairs[:8], cfg), cfg)
    assert logp.shape[0] == labels.shape[0] == sum(2 * len(p[0]) for p in pairs[:8])
    assert float((logp.argmax(-1) == labels).float().mean()) > 0.8
