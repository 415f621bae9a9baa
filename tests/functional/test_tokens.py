"""best_tokens: the native kernel against its reference (log_softmax, index_fill, max) on random rows, odd rows
(NaN, +inf, all -inf, nothing allowed) included, float32 and bfloat16 logits, and the reference path for every
other dtype."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.functional import native
from attnkit.functional.tokens import _reference, best_tokens

# every native variant this CPU runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_variant")


@settings(max_examples=80, deadline=None)
@given(m=st.integers(0, 12), v=st.integers(1, 70), seed=st.integers(0, 2**16),
       bad=st.lists(st.integers(0, 69), max_size=5), odd=st.sampled_from(["", "nan", "inf", "-inf row", "ties"]),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]))
def test_the_kernel_gives_the_reference(m, v, seed, bad, odd, dtype):
    g = torch.Generator().manual_seed(seed)
    x = (4 * torch.randn(m, v, generator=g)).to(dtype)
    if m and odd == "nan":
        x[m // 2, v // 2] = float("nan")
    elif m and odd == "inf":
        x[0, v - 1] = float("inf")
    elif m and odd == "-inf row":
        x[m - 1] = float("-inf")
    elif odd == "ties":
        x = x.round()  # many equal logits: the first largest wins
    suppressed = torch.tensor([i for i in bad if i < v], dtype=torch.long)
    logp, ids = best_tokens(x, suppressed)
    ref_logp, ref_ids = _reference(x.clone(), suppressed)
    assert logp.shape == ids.shape == (m,) and ids.dtype == torch.long and logp.dtype == torch.float32
    assert torch.equal(ids, ref_ids)
    torch.testing.assert_close(logp, ref_logp, atol=1e-5, rtol=1e-5, equal_nan=True)


def test_the_log_probability_is_under_a_softmax_over_every_token():
    x = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    logp, ids = best_tokens(x, torch.tensor([1]))  # 3.0 is suppressed: 2.0 wins, normalised with 3.0 counted
    assert ids.item() == 3
    assert logp.item() == pytest.approx(2.0 - torch.logsumexp(x[0], 0).item(), abs=1e-6)
    logp, ids = best_tokens(torch.tensor([[1.0, 1.0]]), torch.tensor([0, 1]))  # nothing allowed
    assert ids.item() == 0 and logp.item() == float("-inf")  # as the reference: the first of all -inf


@pytest.mark.parametrize("dtype,out", [(torch.float64, torch.float64), (torch.float16, torch.float32)])
def test_other_dtypes_take_the_reference(dtype, out):
    x = torch.randn(3, 40, dtype=dtype)
    logp, ids = best_tokens(x, torch.tensor([2]))
    ref = x.to(out).log_softmax(-1).index_fill(-1, torch.tensor([2]), float("-inf")).max(-1)
    assert logp.dtype == out and torch.equal(ids, ref.indices) and torch.equal(logp, ref.values)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="`logits` must be"):
        best_tokens(torch.randn(2, 3, 4), torch.tensor([1]))
    if native.kernel() is not None:
        with pytest.raises(ValueError, match="`suppressed` ids"):
            best_tokens(torch.randn(2, 8), torch.tensor([8]))
