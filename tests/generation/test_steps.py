"""Decoding step by step (``generation.steps``): the free walk is greedy decoding, each step's candidates are the
model's most likely tokens with its own probabilities, and a forced token changes the rest as greedy decoding from
there would. (The page and the translators' walks: tests/viz/test_steps.py.)"""

import pytest
import torch

from attnkit.generation import generate, token_ids
from attnkit.generation.steps import Steps, autoregressive_steps, walk
from tests.generation.test_generate import sources, tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


def probabilities(m, src, mask, tokens, suppress=()):
    """The model's probabilities (T, V) at every step of a walk writing ``tokens`` (one teacher-forced pass)."""
    rows = torch.tensor([[m.config.bos_token_id, *tokens[:-1]]])
    with torch.no_grad():
        logp = m(src, mask, rows)[0].float().log_softmax(-1)
    logp[:, list(suppress)] = float("-inf")
    return logp.exp()


@pytest.mark.parametrize("seed", [1, 4, 7])
def test_the_free_walk_is_greedy_decoding_with_the_models_probabilities(seed):
    m = tiny_model(seed=seed)
    src, mask = sources(n=3, seed=seed)
    ids = token_ids(m, None, None, None)
    for b in range(3):
        s, k = src[b:b + 1, :int(mask[b].sum())], mask[b:b + 1, :int(mask[b].sum())]
        greedy = generate(m, s, k, max_new_tokens=10, suppress_tokens=[3])
        with torch.no_grad():
            steps = walk(m, m.encode(s, k), k, ids, max_new_tokens=10, suppress=torch.tensor([3]), candidates=4)
        tokens = Steps.tokens(steps)
        assert tokens == greedy.sequences[0, 1:1 + int(greedy.lengths[0])].tolist()
        p = probabilities(m, s, k, tokens, suppress=[3])
        for t, step in enumerate(steps):
            top = p[t].topk(4)
            assert [c for c, _ in step.top] == top.indices.tolist() and 3 not in [c for c, _ in step.top]
            assert torch.allclose(torch.tensor([q for _, q in step.top]), top.values, atol=1e-5)
            assert abs(step.prob - float(p[t, step.chosen])) < 1e-5 and not step.forced


def test_forced_tokens_and_every_candidates_continuation():
    m = tiny_model(seed=4)
    src, mask = sources(n=1, seed=4)
    ids = token_ids(m, None, None, None)
    with torch.no_grad():
        memory = m.encode(src, mask)
        free = Steps.tokens(walk(m, memory, mask, ids, max_new_tokens=10))
        other = next(t for t in range(3, 24) if t != free[1])
        got = autoregressive_steps(m, memory, mask, ids, max_new_tokens=10, candidates=3, force=[{1: other}])
    assert Steps.tokens(got.free) == free and got.start == ids.start
    (force, forced), = got.forced
    tokens = Steps.tokens(forced)
    assert force == {1: other} and tokens[:2] == [free[0], other] and forced[1].forced and not forced[2].forced
    p = probabilities(m, src, mask, tokens)
    assert p[2:].argmax(-1).tolist() == tokens[2:]  # greedy after the forced step
    assert abs(forced[1].prob - float(p[1, other])) < 1e-5  # the forced token's probability is the model's
    assert len(got.alternatives) == sum(len([c for c, _ in s.top if c != s.chosen]) for s in got.free)
    for (t, tok), rest in got.alternatives.items():  # a candidate's continuation: it at step t, greedy after
        assert rest[0].chosen == tok and rest[0].forced
        q = probabilities(m, src, mask, [*free[:t], *Steps.tokens(rest)])
        assert q[t + 1:].argmax(-1).tolist() == Steps.tokens(rest)[1:]
