import pytest
import torch

from attnkit import masks


def test_causal_aligned_to_end():
    m = masks.causal().materialize(2, 4, 2)
    # queries are the last two positions (2, 3) of four keys
    assert m.tolist() == [[True, True, True, False], [True, True, True, True]]
    sq = masks.causal().materialize(3, 3, 2)
    assert torch.equal(sq, torch.ones(3, 3, dtype=torch.bool).tril())


def test_window_definition():
    m = masks.window(1, 2).materialize(5, 5, 2)
    for i in range(5):
        for j in range(5):
            assert bool(m[i, j]) == (i - 1 <= j <= i + 2)


def test_padding_shape_and_values():
    m = masks.padding([3, 1]).materialize(2, 4, 4)
    assert m.shape == (2, 1, 1, 4)
    assert m[0, 0, 0].tolist() == [True, True, True, False]
    assert m[1, 0, 0].tolist() == [True, False, False, False]


def test_graph_direction():
    # edge 0 -> 1: node 1 (query) attends to node 0 (key)
    m = masks.graph(torch.tensor([[0], [1]]), 3).materialize(3, 3, 2)
    assert m.nonzero().tolist() == [[1, 0]]


def test_and_or_combine():
    a, b = masks.causal(), masks.window(1, 1)
    both = (a & b).materialize(4, 4, 2)
    either = (a | b).materialize(4, 4, 2)
    assert torch.equal(both, a.materialize(4, 4, 2) & b.materialize(4, 4, 2))
    assert torch.equal(either, a.materialize(4, 4, 2) | b.materialize(4, 4, 2))
    t = torch.ones(4, 4, dtype=torch.bool)
    assert torch.equal((t & a).materialize(4, 4, 2), a.materialize(4, 4, 2))
    assert [type(p).__name__ for p in masks.conjuncts(a & b & masks.padding([4]))] == ["Causal", "Window", "Padding"]


def test_segments_block_diagonal():
    m = masks.segments([2, 0, 3])
    want = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1]],
                        dtype=torch.bool)
    assert torch.equal(m.materialize(5, 5, 3), want[None])
    assert m.offsets().tolist() == [0, 2, 2, 5] and m.ids().tolist() == [0, 0, 2, 2, 2] and m.longest == 3
    with pytest.raises(ValueError, match="segments: the lengths sum to 5 but Lq=6"):
        m.validate(6, 6, (1,), torch.device("cpu"))


@pytest.mark.parametrize("call, message", [
    (lambda: masks.segments([[1, 2]]), "segments: `lengths`"),
    (lambda: masks.segments([-1, 3]), "segments: `lengths`"),
    (lambda: masks.window(-1, 2), "left"),
    (lambda: masks.window(1, 2.5), "right"),
    (lambda: masks.padding(torch.tensor([[1, 2]])), "lengths"),
    (lambda: masks.padding(torch.tensor([1.0])), "lengths"),
    (lambda: masks.padding([-1]), "lengths"),
    (lambda: masks.graph(torch.tensor([[0, 5], [1, 1]]), 3), "edge_index"),
    (lambda: masks.graph(torch.tensor([[0.0], [1.0]]), 3), "edge_index"),
    (lambda: masks.graph(torch.tensor([0, 1]), 3), "edge_index"),
    (lambda: masks.Dense(torch.ones(3, 3)), "torch.bool"),
])
def test_bad_masks_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
