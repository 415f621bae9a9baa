"""gather_rows: the K/V cache's row moves by memcpy, against index_select, and its entry checks."""

from __future__ import annotations

import re

import pytest
import torch

from attnkit.functional import native

pytestmark = pytest.mark.usefixtures("cpu_variant")


@pytest.fixture(scope="module")
def kernel(cpu_variant):
    k = native.kernel(cpu_variant)
    if k is None:
        pytest.skip(f"native kernel unavailable here: {native.unavailable(cpu_variant)}")
    return k


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8])
@pytest.mark.parametrize("n,b,rows", [(0, 3, 3), (1, 1, 4), (5, 4, 4), (7, 6, 2)])
def test_rows_move_as_index_select_moves_them(kernel, dtype, n, b, rows):
    src = (torch.randn(8, b, 3, 5) * 50).to(dtype)
    index = torch.randint(0, b, (rows,))
    out = torch.full((9, rows, 3, 5), 7).to(dtype)
    assert kernel.gather_rows(src, index, n, out) is out
    assert torch.equal(out[:n], src[:n].index_select(1, index))
    assert (out[n:] == 7).all()  # nothing past n written


def test_bad_arguments_raise_one_line(kernel):
    src, out = torch.randn(4, 3, 8), torch.empty(4, 2, 8)
    cases = {
        "index values must be in": (src, torch.tensor([0, 3]), 2, out),
        "index must be a contiguous": (src, torch.tensor([0, 1], dtype=torch.int32), 2, out),
        "n must be in": (src, torch.tensor([0, 1]), 5, out),
        "same trailing sizes": (src, torch.tensor([0, 1]), 2, torch.empty(4, 2, 7)),
        "one dtype and rank": (src, torch.tensor([0, 1]), 2, out.double()),
        "B' = out.size(1)": (src, torch.tensor([0, 1, 2]), 2, out),
    }
    for message, args in cases.items():
        with pytest.raises(RuntimeError, match=re.escape(message)) as e:
            kernel.gather_rows(*args)
        assert str(e.value).startswith("gather_rows: ") and message in str(e.value).splitlines()[0]
