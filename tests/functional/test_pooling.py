import torch

from attnkit.functional.pooling import masked_max, masked_mean, masked_sum
from attnkit.masks import keep_positions


def test_keep_positions():
    assert keep_positions(torch.tensor([2, 0, 3]), 3).tolist() == [
        [True, True, False], [False, False, False], [True, True, True]]


def test_pooling_ignores_padding_and_matches_unpadded_rows():
    h = torch.randn(3, 5, 4)
    lengths = torch.tensor([5, 2, 0])
    padded = h.clone()
    padded[1, 2:] = 1e6  # garbage in the padding must not leak
    for b, n in enumerate(lengths.tolist()):
        if n:
            torch.testing.assert_close(masked_sum(padded, lengths)[b], h[b, :n].sum(0))
            torch.testing.assert_close(masked_mean(padded, lengths)[b], h[b, :n].mean(0))
            torch.testing.assert_close(masked_max(padded, lengths)[b], h[b, :n].amax(0))
    assert torch.equal(masked_mean(h, lengths)[2], torch.zeros(4))
    torch.testing.assert_close(masked_mean(h, torch.tensor([5, 5, 5])), h.mean(1))  # no padding: no mask
