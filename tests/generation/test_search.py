"""greedy_or_sample's step hook (``on_step``): it sees every step's rules-applied log-probabilities and choice, the
batch as it shrinks, and the tokens it returns are written as the model's own would be."""

import pytest
import torch

from attnkit.generation import greedy_or_sample, token_ids
from tests.generation.test_generate import EOS, PAD, sources, teacher_forced_log_prob, tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")

KW = dict(max_new_tokens=12, min_new_tokens=0, suppress=None, use_cache=True, output_attentions=False,
          length_penalty=1.0)


def decode(m, src, mask, **kw):
    with torch.no_grad():
        return greedy_or_sample(m, m.encode(src, mask), mask, token_ids(m, None, None, None), **KW, **kw)


def test_a_hook_that_returns_none_sees_every_step_and_changes_nothing():
    m = tiny_model(seed=1)
    src, mask = sources(seed=1)
    seen = []

    def look(step, rows, logp, chosen):
        assert logp.shape == (len(rows), m.config.tgt_vocab_size) and chosen.shape == rows.shape
        assert torch.equal(chosen, logp.argmax(-1))  # greedy: the most likely token after the rules
        seen.append((step, rows.tolist(), chosen.tolist()))

    plain, hooked = decode(m, src, mask), decode(m, src, mask, on_step=look)
    assert torch.equal(plain.tokens, hooked.tokens) and torch.equal(plain.log_probs, hooked.log_probs)
    assert [s for s, _, _ in seen] == list(range(int(plain.lengths.max())))
    assert len(seen[-1][1]) < src.shape[0]  # finished sentences left the batch, and the hook saw it
    for step, rows, chosen in seen:  # each sentence's token at each step, as written
        for r, t in zip(rows, chosen):
            if step < int(plain.lengths[r]):
                assert int(plain.tokens[r, step]) == t


def test_tokens_a_hook_returns_are_written_and_decoding_goes_on_from_them():
    m = tiny_model(seed=4)
    src, mask = sources(seed=4)
    plain = decode(m, src, mask)
    forced = 5 if int(plain.tokens[0, 1]) != 5 else 6  # not the greedy token of sentence 0 at step 1
    out = decode(m, src, mask, on_step=lambda step, rows, logp, chosen: torch.full_like(chosen, forced)
                 if step == 1 else None)
    assert (out.tokens[plain.lengths > 1, 1] == forced).all()  # every sentence still decoding at step 1
    for b in range(src.shape[0]):
        n = int(out.lengths[b])
        seq = torch.tensor([[m.config.bos_token_id, *out.tokens[b, :n].tolist()]])
        with torch.no_grad():  # after the forced step: greedy on the prefix that holds it
            logp = m(src[b:b + 1], mask[b:b + 1], seq[:, :-1])[0].log_softmax(-1)
            assert logp[2:].argmax(-1).tolist() == seq[0, 3:].tolist()
            # the log-probability is the model's own of the tokens written, the forced one included
            assert abs(float(out.log_probs[b]) - teacher_forced_log_prob(m, src[b:b + 1], mask[b:b + 1], seq)) < 1e-4
        assert (out.tokens[b, n:] == PAD).all() and (n == KW["max_new_tokens"] or int(out.tokens[b, n - 1]) == EOS)


def test_a_hook_returning_something_else_is_refused():
    m = tiny_model(seed=1)
    src, mask = sources(seed=1)
    with pytest.raises(ValueError, match=r"greedy_or_sample: `on_step` must return None or a token per row \(8,\), "
                                         r"got \(1,\)"):
        decode(m, src, mask, on_step=lambda step, rows, logp, chosen: chosen[:1])
