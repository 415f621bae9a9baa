"""The tasks added for issue 38 in their --quick form (seconds each): MQAR scored at its queries, ListOps of
bounded depth with accuracy per depth, Pathfinder after self-pretraining; the depth and masking helpers."""

import pytest
import torch

from attnkit.data.listops import VOCAB
from attnkit.lra.cell import collate, run_cell
from attnkit.lra.depth import model_by_depth, nesting_depth, rule_by_depth
from attnkit.lra.model import PerPosition, build_model
from attnkit.lra.pretrain import mask_tokens, pretrain
from attnkit.lra.settings import SUITES
from attnkit.lra.tasks import _folder, prepare_task
from attnkit.train.metrics import IGNORE


def _ids(text: str) -> list[int]:
    return [VOCAB.index(t) for t in text.split()]


def test_nesting_depth_and_the_rule_per_depth():
    assert nesting_depth(_ids("7")) == 0
    assert nesting_depth(_ids("[MAX 1 2 ]")) == 1
    assert nesting_depth(torch.tensor(_ids("[MAX 1 [MIN 2 [SM 3 4 ] ] [MED 5 6 ] ]"))) == 3
    t = torch.tensor
    train = [(t(_ids("[MAX 1 9 ]")), 9), (t(_ids("[MAX 1 2 ]")), 9), (t(_ids("[MIN 1 2 ]")), 1)]
    test = [(t(_ids("[MAX 1 9 ]")), 9), (t(_ids("[MAX 1 [MIN 2 3 ] ]")), 2), (t(_ids("[MIN 0 [MAX 2 3 ] ]")), 0),
            (t(_ids("[SM 4 5 ]")), 9)]
    # MAX -> 9, MIN -> 1, SM unseen (never right): depth 1: 1 of 2; depth 2: 0 of 2
    assert rule_by_depth(train, test) == {"1": [1, 2], "2": [0, 2]}


def test_model_by_depth_counts_every_example():
    class Says(torch.nn.Module):  # predicts the class of the first token's id modulo 10
        def forward(self, tokens, lengths):
            return torch.nn.functional.one_hot(tokens[:, 0] % 10, 10).float()

    t = torch.tensor
    examples = [(t(_ids("[MAX 1 9 ]")), VOCAB.index("[MAX") % 10), (t(_ids("[MAX 1 [MIN 2 3 ] ]")), 0),
                (t(_ids("[MIN 0 [MAX 2 3 ] ]")), VOCAB.index("[MIN") % 10)]
    assert model_by_depth(Says(), examples, collate, batch_size=2) == {"1": [1, 1], "2": [1, 2]}


def test_masking_hides_a_share_of_the_real_tokens():
    tokens = torch.cat([torch.arange(1, 201), torch.zeros(50, dtype=torch.long)])  # 200 real, 50 padding
    masked, targets = mask_tokens(tokens, 0.5, 999, torch.Generator().manual_seed(0))
    hidden = masked == 999
    assert 70 < int(hidden.sum()) < 130 and not hidden[200:].any()  # about half, never padding
    assert torch.equal(targets[hidden], tokens[hidden]) and bool((targets[~hidden] == IGNORE).all())
    assert torch.equal(masked[~hidden], tokens[~hidden])
    one = mask_tokens(torch.tensor([5, 6]), 1e-9, 999, torch.Generator().manual_seed(0))[0]
    assert int((one == 999).sum()) == 1  # at least one token is always asked


def test_mqar_quick_cell_scores_only_the_queries(tmp_path, one_thread):
    s = SUITES["quick"]["mqar"]
    data = prepare_task(s, tmp_path / "data", seed=0)
    tokens, targets = data.train[0]
    assert tokens.shape == targets.shape == (128,) and int((targets != IGNORE).sum()) == 8
    row = run_cell("mqar", "performer", s, data, tmp_path / "cell", seed=0)
    assert 0.0 <= row["test_accuracy"] <= 1.0 and row["steps"] == s.steps and "by_depth" not in row
    body = build_model(s, "full", data.vocab_size, data.num_classes)
    scores = PerPosition(body, shift=True)(tokens[None], torch.tensor([128]))
    assert scores.shape == (1, 128, data.num_classes)


def test_listops_short_quick_cell_reports_depths(tmp_path, one_thread):
    s = SUITES["quick"]["listops-short"]
    data = prepare_task(s, tmp_path / "data", seed=1)
    assert max(len(e[0]) for e in data.train) < 64 and {nesting_depth(e[0]) for e in data.train} == {1, 2, 3}
    row = run_cell("listops-short", "local", s, data, tmp_path / "cell", seed=1)
    assert sum(n for _, n in row["by_depth"].values()) == len(data.test)
    assert sum(c for c, _ in row["by_depth"].values()) == round(row["test_accuracy"] * len(data.test))


def test_pathfinder_quick_cell_pretrains_first(tmp_path, one_thread):
    s = SUITES["quick"]["pathfinder"]
    assert s.pretrain_steps > 0
    data = prepare_task(s, tmp_path / "data", seed=0)
    row = run_cell("pathfinder", "linear", s, data, tmp_path / "cell", seed=0)
    assert row["pretrain"]["steps"] == s.pretrain_steps and row["pretrain"]["dev_curve"][-1][0] == s.pretrain_steps
    assert (tmp_path / "cell" / "pretrain" / "metrics.jsonl").exists()
    assert (tmp_path / "cell" / "train" / "metrics.jsonl").exists() and row["steps"] == s.steps


def test_pretraining_changes_the_body_it_is_given(tmp_path, one_thread):
    s = SUITES["quick"]["pathfinder"].replace(n_train=32, n_val=8, n_test=8)
    data = prepare_task(s, tmp_path / "data", seed=0)
    body = build_model(s, "full", data.vocab_size + 1, 2)
    before = body.embed.weight.detach().clone()
    result = pretrain(body, s, data, tmp_path / "pre", seed=0)
    assert result["step"] == s.pretrain_steps and not torch.equal(before, body.embed.weight)
    with pytest.raises(ValueError, match="plus one for the mask"):
        pretrain(build_model(s, "full", data.vocab_size, 2), s, data, tmp_path / "pre2")


def test_image_crops_the_centre_before_pooling(tmp_path):
    s = SUITES["quick"]["image"].replace(n_train=4, n_val=2, n_test=2)
    with pytest.raises(ValueError, match="seq_len=81 must be side"):  # 9 x 3 = 27: one pixel left over
        prepare_task(s.replace(seq_len=81), tmp_path, seed=0)
    try:
        whole = prepare_task(s.replace(seq_len=784), tmp_path, seed=0)
    except FileNotFoundError:
        pytest.skip("MNIST is not in the data root here")
    centre = prepare_task(s.replace(seq_len=100), tmp_path, seed=0)  # the centre 20 x 20 in 2 x 2 pools
    assert "crop 4, pool 2" in centre.source and centre.train[0][1] == whole.train[0][1]
    pixels = (whole.train[0][0] - 1).reshape(28, 28)[4:24, 4:24].double()  # (20, 20)
    pooled = pixels.reshape(10, 2, 10, 2).mean((1, 3)).round().long() + 1  # (10, 10)
    assert torch.equal(centre.train[0][0], pooled.flatten())


def test_pathfinder_folder_names_every_generator_option(tmp_path):
    """A generator option, given or by default, names the data: no stale images when a default changes."""
    s = SUITES["full"]["pathfinder"]
    assert _folder(tmp_path, s, 0) == _folder(tmp_path, s.replace(generator={"match_distance": True}), 0)
    assert _folder(tmp_path, s, 0) != _folder(tmp_path, s.replace(generator={"match_distance": False}), 0)
    assert _folder(tmp_path, s, 0) != _folder(tmp_path, s, 1)
    name = _folder(tmp_path, s, 0).name
    assert name.startswith("pathfinder-L256-n8000-500-1000-") and name.endswith("-seed0") and len(name) == 45
