"""beam.BeamState's bookkeeping, seen through beam_search: sentences that can no longer improve leave the batch
(their rows of memory and cache dropped) with their best hypothesis kept, and the batch gives each sentence
what it gives alone."""

import pytest
import torch

from attnkit.generation import generate

from .test_generate import sources, tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


class Moves:
    """A model whose reorder_cache calls are recorded: the rows each move keeps."""

    def __init__(self, model):
        self.model, self.config, self.rows = model, model.config, []

    def encode(self, *a, **k):
        return self.model.encode(*a, **k)

    def decode_step(self, *a, **k):
        return self.model.decode_step(*a, **k)

    def reorder_cache(self, cache, index, **k):
        self.rows.append(index.numel())
        return self.model.reorder_cache(cache, index, **k)


@pytest.mark.parametrize("early_stopping", [False, True])
def test_closed_sentences_leave_the_batch_and_keep_their_best(early_stopping):
    m = tiny_model(seed=4)
    ids, mask = sources(8, seed=4)
    kw = dict(num_beams=3, max_new_tokens=20, early_stopping=early_stopping)
    moves = Moves(m)
    batch = generate(moves, ids, mask, **kw)
    assert moves.rows[0] == 8 * 3 and min(moves.rows) < 8 * 3  # beams made, then whole sentences left
    assert all(r % 3 == 0 for r in moves.rows)  # a sentence leaves with all its beams
    for i in range(8):
        n = int(mask[i].sum())
        alone = generate(m, ids[i:i + 1, :n], mask[i:i + 1, :n], **kw)
        w = alone.sequences.shape[1]
        assert torch.equal(batch.sequences[i, :w], alone.sequences[0])
        torch.testing.assert_close(batch.sequences_scores[i], alone.sequences_scores[0], atol=1e-5, rtol=1e-5)
