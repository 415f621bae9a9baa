"""The automatic choice: one ordered table, shown in the README, explained per call."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import attnkit
from attnkit import masks as M
from attnkit.functional import Choice, dispatch, get_backend, native, select_backend, why_backend

README = Path(attnkit.__file__).resolve().parent.parent / "README.md"


def test_readme_shows_the_table_the_code_uses():
    text = README.read_text()
    start = text.index("\n", text.index("<!-- dispatch-table")) + 1
    end = text.index("<!-- /dispatch-table -->")
    assert text[start:end].strip() == dispatch.markdown_table()


def test_rows_name_exact_registered_backends_and_end_with_one_that_takes_everything():
    names = [r.backend for r in dispatch.RULES]
    assert len(set(names)) == len(names)
    assert all(get_backend(n).exact for n in names)  # an approximation is never chosen for you
    assert names[0] == "math" and names[-1] == "sdpa"
    q = torch.randn(2, 3, 5, 8)
    assert dispatch.RULES[-1].test(dispatch.Call.of(q, q, q))


def test_explain_names_the_row_and_why_the_rows_above_did_not_apply():
    q = torch.randn(2, 12, 24, 32)
    choice = why_backend(q, q, q, M.causal())  # grad mode on: the inference-only rows do not apply
    assert isinstance(choice, Choice) and choice.backend == "sdpa"
    rejected = dict(choice.rejected)
    assert list(rejected) == [r.backend for r in dispatch.RULES[:-1]]
    assert rejected["tiled"].startswith("not chosen when: inference on CPU")
    assert choice.why.startswith("everything else")
    assert select_backend(q, q, q, M.causal(), explain=True) == choice


@pytest.mark.skipif(native.kernel() is None, reason="needs the native kernel")
def test_a_row_whose_backend_refuses_the_call_is_skipped_with_its_reason():
    q = torch.randn(2, 12, 24, 32)
    with torch.no_grad():
        assert select_backend(q, q, q, M.causal()) == "tiled"
        h = q.half()  # float16: the tiled kernel cannot
        choice = why_backend(h, h, h, M.window(2, 2))
        assert choice.backend == "math_grouped"
        assert dict(choice.rejected)["tiled"] == "backend 'tiled' takes float32, bfloat16 inputs here, got float16"
        assert attnkit.attention(h, h, h, M.window(2, 2)).shape == (2, 12, 24, 32)
        assert select_backend(q, q, q[..., :8], M.causal()) == "sdpa"  # short and no window: dv % 16 only


def test_weights_always_come_from_the_math_row():
    q = torch.randn(1, 2, 600, 8)
    for mask in (None, M.window(4, 4), M.causal()):
        assert select_backend(q, q, q, mask, need_weights=True) == "math"


def test_selection_validates_its_arguments():
    q = torch.randn(2, 3, 5, 8)
    with pytest.raises(ValueError, match="one device"):
        select_backend(q, q.to("meta"), q)


@pytest.mark.skipif(native.kernel() is None, reason="needs the native kernel")
def test_a_narrow_window_goes_to_tiled_at_any_length_in_inference_only():
    q = torch.randn(1, 4, 3000, 36)  # a speech encoder's 30 s: heads of 36, window (8, 8)
    mask = M.window(8, 8) & M.padding(torch.tensor([2900]))
    with torch.no_grad():
        assert select_backend(q, q, q, mask) == "tiled"
        assert select_backend(q, q, q, M.window(64, 64)) == "tiled"  # 129 keys wide
        assert select_backend(q, q, q, M.window(65, 64)) == "local"  # wider: the local row
    assert select_backend(q, q, q, mask) == "local"  # training: local has the backward
