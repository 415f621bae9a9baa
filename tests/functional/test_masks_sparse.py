"""The sparse-pattern masks: global tokens (Longformer) and strided (Sparse Transformer), by definition."""

import pytest
import torch

from attnkit import masks


def test_global_tokens_definition():
    m = masks.global_tokens([0, 3]).materialize(6, 6, 2)
    for i in range(6):
        for j in range(6):
            assert bool(m[i, j]) == (i in (0, 3) or j in (0, 3))
    assert masks.global_tokens(2).positions == (0, 1)
    assert masks.global_tokens([3, 0, 3]).positions == (0, 3)


def test_strided_definition_and_alignment():
    m = masks.strided(3).materialize(7, 7, 2)
    for i in range(7):
        for j in range(7):
            assert bool(m[i, j]) == ((i - j) % 3 == 0)
    tail = masks.strided(2).materialize(2, 5, 2)  # queries are the last two of five positions (3, 4)
    assert tail.tolist() == [[False, True, False, True, False], [True, False, True, False, True]]


def test_longformer_and_sparse_transformer_unions():
    lf = (masks.window(1, 1) | masks.global_tokens(1)).materialize(5, 5, 2)
    assert lf[4].tolist() == [True, False, False, True, True] and lf[0].all()
    st = (masks.window(2, 0) | masks.strided(2)) & masks.causal()
    dense = st.materialize(6, 6, 2)
    assert dense[5].tolist() == [False, True, False, True, True, True]
    assert masks.disjuncts(masks.window(1, 1) | masks.strided(2) | masks.global_tokens(1))[1] == masks.strided(2)


@pytest.mark.parametrize("call, message", [
    (lambda: masks.strided(0), "stride"),
    (lambda: masks.global_tokens(-1), "global tokens"),
    (lambda: masks.GlobalTokens((2, 1)), "sorted"),
    (lambda: masks.global_tokens(["a"]), "positions"),
    (lambda: masks.global_tokens([5]).validate(4, 4, (), torch.device("cpu")), "past the key length"),
])
def test_bad_masks_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_masks_broadcast_to_heads():
    m = masks.for_heads(masks.global_tokens(1) | masks.strided(2)).materialize(4, 4, 4)
    assert m.shape == (1, 1, 4, 4) and m.dtype == torch.bool
