"""CTC: the collapse rule, prefix scores against a brute-force sum over every frame labelling, and the joint
CTC/attention beam search against ``beam_search`` (weight 0) and exhaustive search (weight 1)."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest
import torch

from attnkit.generation import beam_search
from attnkit.generation.ctc import CTCPrefixScorer, CTCState, collapse, ctc_beam_search, ctc_greedy
from attnkit.generation.protocol import TokenIds
from attnkit.models.asr import BOS, EOS, NUM_TOKENS, PAD, AsrConfig, label_of_tokens

pytestmark = pytest.mark.usefixtures("one_thread")


def test_collapse_merges_repeats_then_drops_blanks():
    assert collapse([1, 1, 0, 1, 2, 2, 0]) == [1, 1, 2]
    assert collapse([0, 0, 0]) == [] and collapse([]) == []
    assert collapse(torch.tensor([3, 0, 3, 3, 1]), blank=0) == [3, 3, 1]
    assert collapse([2, 2, 1, 2], blank=2) == [1]
    lp = torch.log(torch.tensor([[[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]],
                                 [[0.1, 0.1, 0.8], [0.1, 0.1, 0.8], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8]]]))
    assert ctc_greedy(lp) == [[1, 1, 2], [2, 2]]
    assert ctc_greedy(lp, torch.tensor([2, 3])) == [[1], [2]]  # only the first lengths[b] frames
    with pytest.raises(ValueError, match=r"\(B, T, C\)"):
        ctc_greedy(lp[0])


def brute_force(lp: torch.Tensor, n: int, prefix: list[int]) -> tuple[float, float]:
    """(log P(labelling starts with prefix), log P(labelling == prefix)) over every labelling of n frames."""
    starts, exact = [], []
    table = lp.tolist()
    for path in itertools.product(range(lp.shape[1]), repeat=n):
        s = math.fsum(table[t][c] for t, c in enumerate(path))
        lab = collapse(path)
        if lab[:len(prefix)] == prefix:
            starts.append(s)
        if lab == prefix:
            exact.append(s)
    lse = lambda xs: float(torch.tensor(xs, dtype=torch.float64).logsumexp(0)) if xs else -math.inf  # noqa: E731
    return lse(starts), lse(exact)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prefix_scores_equal_the_brute_force_sums(seed):
    g = torch.Generator().manual_seed(seed)
    t, c = 5, 3
    lp = (2 * torch.randn(2, t, c, generator=g, dtype=torch.float64)).log_softmax(-1)
    lengths = torch.tensor([5, 4])
    scorer = CTCPrefixScorer(lp, lengths)
    init = scorer.initial()
    for b in range(2):
        state = CTCState(init.r[b:b + 1], init.score[b:b + 1], init.last[b:b + 1])
        prefix: list[int] = []
        for nxt in (1, 1, 2, 2):  # repeats need a blank between them
            scores, end, r_new = scorer.extend(state, torch.tensor([b]))
            n = int(lengths[b])
            assert float(end[0]) == pytest.approx(brute_force(lp[b], n, prefix)[1], abs=1e-9)
            for lab in (1, 2):
                want = brute_force(lp[b], n, prefix + [lab])[0]
                got = float(scores[0, lab])
                assert (got == want == -math.inf) or got == pytest.approx(want, abs=1e-9), (prefix, lab)
            assert scores[0, 0] == -math.inf  # blank is not a label
            # P(prefix ...) = P(prefix) + sum over labels of P(prefix + label ...)
            total = torch.cat((scores[0, 1:], end)).logsumexp(0)
            assert float(total) == pytest.approx(float(state.score[0]), abs=1e-9)
            state = scorer.select(state, torch.tensor([0]), torch.tensor([nxt]), scores, end, r_new,
                                  torch.tensor([False]))
            prefix.append(nxt)


class Scripted:
    """A decoder whose next-token scores depend on the utterance and the whole prefix (a seeded draw per
    prefix), END more likely as the prefix grows: hypotheses end at various lengths. ``memory`` (B, 1, 1)
    holds each row's utterance number; the cache is the prefix."""

    config = AsrConfig()

    def decode_step(self, tokens, memory, memory_mask=None, cache=None, *, use_cache=True, output_attentions=False):
        prefix = tokens if cache is None else torch.cat((cache, tokens), dim=1)
        rows = []
        for utt, seq in zip(memory[:, 0, 0].tolist(), prefix.tolist()):
            g = torch.Generator().manual_seed(hash((int(utt), *seq)) % 2**31)
            row = 2 * torch.randn(NUM_TOKENS, generator=g)
            row[EOS] += 1.2 * len(seq) - 3
            rows.append(row)
        return SimpleNamespace(logits=torch.stack(rows), cache=prefix, cross_attentions=None)

    @staticmethod
    def reorder_cache(cache, index, *, cross=True):
        return cache.index_select(0, index)


IDS = TokenIds(pad=PAD, eos=EOS, start=BOS)
SUPPRESS = torch.tensor([PAD, BOS])


@pytest.mark.parametrize("beams", [1, 3, 5])
def test_joint_search_with_ctc_weight_0_is_beam_search(beams):
    m, b = Scripted(), 6
    memory = torch.arange(b, dtype=torch.float32).view(b, 1, 1)
    lp = torch.randn(b, 7, 11).log_softmax(-1)  # read only with a CTC weight
    ref = beam_search(m, memory, None, IDS, num_beams=beams, max_new_tokens=8, min_new_tokens=0, suppress=SUPPRESS,
                      use_cache=True, output_attentions=False, length_penalty=0.0, early_stopping=False)
    got = ctc_beam_search(m, memory, None, lp, torch.full((b,), 7), IDS, label_of=label_of_tokens(), num_beams=beams,
                          ctc_weight=0.0, max_new_tokens=8, suppress=SUPPRESS)
    assert len(set(ref.lengths.tolist())) > 2  # the test model ends at various lengths
    assert torch.equal(got.lengths, ref.lengths) and torch.equal(got.tokens, ref.tokens)
    torch.testing.assert_close(got.scores, ref.scores)


def test_joint_search_with_ctc_weight_1_finds_the_most_likely_labelling():
    g = torch.Generator().manual_seed(3)
    t = 4
    lp = torch.full((1, t, 11), -30.0, dtype=torch.float64)
    lp[0, :, :3] = torch.randn(t, 3, generator=g, dtype=torch.float64) * 2  # blank, digits 0 and 1
    lp = lp.log_softmax(-1)
    # a beam wider than every labelling of up to t labels: the search is exhaustive
    got = ctc_beam_search(Scripted(), torch.zeros(1, 1, 1), None, lp, torch.tensor([t]), IDS,
                          label_of=label_of_tokens(), num_beams=64, ctc_weight=1.0, max_new_tokens=t + 1)
    best = max((brute_force(lp[0, :, :3], t, list(seq))[1], list(seq))
               for n in range(t + 1) for seq in itertools.product((1, 2), repeat=n))
    found = [int(tok) - 2 for tok in got.tokens[0, :int(got.lengths[0]) - 1]]  # tokens -> CTC classes
    assert got.tokens[0, int(got.lengths[0]) - 1] == EOS
    assert found == best[1] and float(got.scores[0]) == pytest.approx(best[0], abs=1e-4)
