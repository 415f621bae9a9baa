"""NATEngine.first_pass in one native call (NatFirstPass, nat_first_pass.h) against the same pass from Python
(``NATEngine.python_first_pass``, its reference): bit for bit the same memory, length, tokens, log-probabilities and
cross-attention cache over random models (pre- and post-LN, every activation and input position), sentence
lengths, suppressed ids (unsorted, repeated), one and two threads, float32 and bfloat16; rows the token
kernel leaves undecided; a length past the native layers; and bad input, which raises a one-line error."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.functional import native
from attnkit.inference import LAYER_ROWS, onednn_available
from attnkit.inference.native import compositions, packed_rows
from attnkit.models.nat import ctc_row_length

from .test_nat import model, nat_engine

K = compositions()
pytestmark = [pytest.mark.skipif(K is None or not onednn_available(), reason="no native kernel or no oneDNN"),
              pytest.mark.usefixtures("cpu_variant")]
BF16 = K is not None and bool(native.kernel().cpu_has_bf16())


@pytest.fixture(autouse=True, scope="module")
def _variant_kernels(cpu_variant):
    """K and BF16 of the variant under test (the module-level ones above are the default variant's)."""
    global K, BF16
    K = compositions()
    BF16 = K is not None and bool(native.kernel().cpu_has_bf16())


def nat(norm_first=True, activation="relu", positional="sinusoidal", seed=0, dtype=torch.float32, longest=False):
    """The NATEngine of a random NATModel: d 64 in 2 heads (bfloat16's native layers take heads of 32), 2 encoder and
    3 decoder layers, 40 words; ``longest``: the classifier always picks the longest offset, T = S + 4."""
    m = model(norm_first, activation=activation, positional=positional, seed=seed, d_model=64, vocab=40,
              decoder_layers=3)
    if longest:
        with torch.no_grad():
            m.length_head.bias[-1] = 1e4
    return nat_engine(m.to(dtype))


def same(a, b):
    """Two first passes' results, bit for bit (NaN where the other has NaN)."""
    for x, y in zip(a[:4], b[:4]):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert torch.equal(x, y) or torch.allclose(x, y, rtol=0, atol=0, equal_nan=True), (x, y)
    assert (a[4] is None) == (b[4] is None)
    for c, d in zip(a[4] or [], b[4] or []):
        assert all(torch.equal(u, v) for u, v in zip(c.cross_kv, d.cross_kv))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), norm_first=st.booleans(), activation=st.sampled_from(["relu", "gelu", "silu"]),
       positional=st.sampled_from(["sinusoidal", "learned", "none"]), bf16=st.booleans(),
       threads=st.sampled_from([1, 2]), cache=st.booleans(), seed=st.integers(0, 3))
def test_the_native_pass_is_the_python_pass_bit_for_bit(data, norm_first, activation, positional, bf16, threads, cache,
                                                       seed):
    if bf16 and not BF16:
        return
    fast = nat(norm_first, activation, positional, seed=seed, dtype=torch.bfloat16 if bf16 else torch.float32)
    assert fast.first_pass_kernel() is not None
    s = data.draw(st.integers(1, LAYER_ROWS), label="S")
    ids = torch.tensor([data.draw(st.lists(st.integers(0, 39), min_size=s, max_size=s), label="ids")])
    bad = torch.tensor(data.draw(st.lists(st.integers(0, 39), max_size=6), label="suppressed"), dtype=torch.long)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got, want = fast.first_pass(ids, bad, use_cache=cache), fast.python_first_pass(ids, bad, cache)
    finally:
        torch.set_num_threads(before)
    same(got, want)
    t = int(got[1])
    assert 1 <= t <= fast.config.max_target_length and got[2].shape == (1, t)
    assert not bool(torch.isin(got[2], bad).any())  # a suppressed id is never chosen


def test_rows_the_token_kernel_leaves_undecided_take_the_reference():
    fast = nat()
    ids = torch.randint(4, 40, (1, 9))
    with torch.no_grad():  # token 7's output weights infinite: its logit is +-inf or NaN at every position
        layouts = fast.base.output.native_layouts()
        for w in (layouts["blocked"], layouts["panels"]):
            w.copy_(torch.where(torch.rand_like(w) < 0.2, torch.full_like(w, float("inf")), w))
    bad = torch.tensor([0, 1, 2])
    got, want = fast.first_pass(ids, bad), fast.python_first_pass(ids, bad, False)
    same(got, want)


def test_a_length_past_the_native_layers_continues_from_python():
    fast = nat(longest=True)
    ids = torch.randint(4, 40, (1, LAYER_ROWS))
    got = fast.first_pass(ids, torch.tensor([0]), use_cache=True)
    assert int(got[1]) == LAYER_ROWS + 4 and got[2].shape == (1, LAYER_ROWS + 4)
    same(got, fast.python_first_pass(ids, torch.tensor([0]), True))


@pytest.mark.parametrize("ids,suppressed,message", [
    (torch.tensor([[3, 40, 5]]), torch.tensor([0]),
     "`input_ids` holds 40 at position 1, outside the source vocabulary"),
    (torch.tensor([[3, -1]]), torch.tensor([0]), "`input_ids` holds -1 at position 1"),
    (torch.tensor([[3, 4]]), torch.tensor([0, 40]), "`suppressed` ids must be in [0, 40)"),
    (torch.tensor([[3, 4]]), torch.tensor([-2]), "`suppressed` ids must be in [0, 40)"),
    (torch.tensor([[3, 4]], dtype=torch.int32), torch.tensor([0]), "`input_ids` must be a contiguous (1, S) int64"),
    (torch.tensor([[3, 4], [5, 6]]), torch.tensor([0]), "`input_ids` must be a contiguous (1, S) int64"),
    (torch.zeros(1, 0, dtype=torch.long), torch.tensor([0]), "with S >= 1"),
    (torch.randint(4, 40, (1, LAYER_ROWS + 1)), torch.tensor([0]), "more than the 32 this pass takes"),
    (torch.tensor([[3, 4]]), torch.tensor([[0]]), "`suppressed` must be a (n,) int64 CPU tensor"),
])
def test_bad_input_to_the_native_pass_is_a_one_line_value_error(ids, suppressed, message):
    run = nat().first_pass_kernel()
    with pytest.raises(ValueError) as e:
        run(ids, suppressed)
    assert message in str(e.value) and "NatFirstPass" in str(e.value)


@pytest.mark.parametrize("shift_id,shift,message", [(40, 1.0, "`shift_id` must be -1 (none) or a token id in [0, 40)"),
                                                    (-2, 1.0, "`shift_id` must be -1 (none)"),
                                                    (0, float("nan"), "and `shift` finite, got 0 and nan")])
def test_a_bad_logit_shift_is_a_one_line_value_error(shift_id, shift, message):
    with pytest.raises(ValueError) as e:
        nat().first_pass_kernel()(torch.tensor([[3, 4]]), torch.tensor([0]), shift_id, shift)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_python_entry_checks_ids_before_the_native_pass():
    fast = nat()
    with pytest.raises(ValueError, match="outside the source vocabulary"):
        fast.first_pass(torch.tensor([[3, 41]]), torch.tensor([0]))


def _parts(fast):
    """NatFirstPass's named arguments for ``fast`` (what ``inference.first_pass`` gives it)."""
    base = fast.base
    enc, norm = base.encoder, base.final_norm
    return dict(encoder=enc.stack, decoder=fast.stack, src_table=base.src_table,
                positions=enc.positions.rows(0, 64).contiguous(), mask_rows=fast.masked_rows(40).clone(),
                encoder_norm=(enc.norm.weight, enc.norm.bias), decoder_norm=(norm.weight, norm.bias), norm_eps=1e-5,
                length=packed_rows(fast.length), length_offset=4, ctc_row=None, cross_kv=packed_rows(base.cross_kv),
                output=packed_rows(base.output), max_rows=LAYER_ROWS, max_row=LAYER_ROWS)


def _rows(linear, **change):
    """A PackedRows of ``linear`` with fields changed."""
    return K.PackedRows(**{**linear.native_layouts(), **change})


@pytest.mark.parametrize("change,message", [
    (lambda f, p: p.update(encoder=p["decoder"]), "the encoder's layers must have no cross-attention"),
    (lambda f, p: p.update(decoder=p["encoder"]), "the decoder's layers must have cross-attention"),
    (lambda f, p: p.update(decoder=K.LayerStack([])), "LayerStack: give at least one layer"),
    (lambda f, p: p.update(encoder_norm=(p["encoder_norm"][0][:32], p["encoder_norm"][1])),
     "`encoder_norm` must be (weight, bias), each (64,)"),
    (lambda f, p: p.update(length=_rows(f.length, blocked=f.length.panel_weight())),
     "`blocked` must be W blocked (N / 4, K / 16, 4, 16) and `panels` the same W in panels"),
    (lambda f, p: p.update(output=_rows(f.base.output, panels=f.base.output.blocked_weight())),
     "`blocked` must be W blocked"),
    (lambda f, p: p.update(cross_kv=p["output"]), "`cross_kv` must have 2d x decoder layers = 384 outputs, got 40"),
    (lambda f, p: p.update(output=_rows(f.base.output, outputs=30)), "48 packed outputs, of which 30 the layer's own"),
    (lambda f, p: p.update(output=_rows(f.base.output, panels_from=0)), "panels from 0 rows"),
    (lambda f, p: p.update(mask_rows=p["mask_rows"][0]), "`mask_rows` must be a contiguous (1, max_T, 64)"),
    (lambda f, p: p.update(mask_rows=p["mask_rows"].double()), "`mask_rows` must be a contiguous (1, max_T, 64)"),
    (lambda f, p: p.update(positions=p["positions"][:, :32]), "`positions` must be (P, 64)"),
    (lambda f, p: p.update(encoder=nat(activation="gelu").base.encoder.stack),
     "must share dtype, d, num_heads, act, norm_first, eps and scale"),
    (lambda f, p: p.update(src_table=p["src_table"].double()), "`src_table` must be a contiguous (V, 64) CPU tensor"),
    (lambda f, p: p.update(src_table=p["src_table"].t()), "`src_table` must be a contiguous (V, 64) CPU tensor"),
    (lambda f, p: p.update(length_offset=-1), "`length_offset` must be >= 0"),
    (lambda f, p: p.update(max_rows=0), "`max_rows` and `max_row` must be >= 1"),
    (lambda f, p: p.update(max_row=0), "`max_rows` and `max_row` must be >= 1"),
    (lambda f, p: p.update(ctc_row=(3, 2)), "give either `length` (the classifier) or `ctc_row`"),
    (lambda f, p: p.update(length=None), "give either `length` (the classifier) or `ctc_row`"),
    (lambda f, p: p.update(length=None, ctc_row=(0, 1)), "`ctc_row` must be (p, q), whole numbers in [1, 1000000]"),
])
def test_bad_weights_are_refused_when_the_pass_is_made(change, message):
    fast = nat()
    with pytest.raises(RuntimeError) as e:
        parts = _parts(fast)
        change(fast, parts)
        K.NatFirstPass(**parts)
    assert message in str(e.value)


def test_the_pass_is_made_once_and_only_where_every_part_runs_natively():
    fast = nat()
    assert fast.first_pass_kernel() is fast.first_pass_kernel()
    other = nat()
    other.base.encoder.stack_kernel = None  # an encoder the one-call stack does not run: the Python pass
    assert other.first_pass_kernel() is None
    ids = torch.randint(4, 40, (1, 6))
    same(other.first_pass(ids, torch.tensor([0])), fast.first_pass(ids, torch.tensor([0])))
    assert compositions() is K


def ctc(ratio=2.0, seed=0, dtype=torch.float32):
    """The NATEngine of a random CTC model (``nat``'s sizes): its row is ceil(ratio S), no length classifier."""
    m = model(True, seed=seed, d_model=64, vocab=40, decoder_layers=3, nat_loss="ctc", ctc_upsample=ratio)
    return nat_engine(m.to(dtype))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), ratio=st.sampled_from([1.0, 1.5, 2.0, 2.5]), bf16=st.booleans(), seed=st.integers(0, 3),
       penalty=st.sampled_from([0.0, 2.0, -1.5]))
def test_a_ctc_model_s_pass_writes_its_row_bit_for_bit_as_the_python_pass(data, ratio, bf16, seed, penalty):
    if bf16 and not BF16:
        return
    fast = ctc(ratio, seed, torch.bfloat16 if bf16 else torch.float32)
    assert fast.length is None and fast.first_pass_kernel() is not None
    s = data.draw(st.integers(1, LAYER_ROWS), label="S")
    ids = torch.randint(3, 40, (1, s), generator=torch.Generator().manual_seed(s))
    bad = torch.tensor([1, 2])
    shift = (0, -penalty) if penalty else None
    got, want = fast.first_pass(ids, bad, shift=shift), fast.python_first_pass(ids, bad, False, shift)
    same(got, want)
    t = ctc_row_length(s, fast.config)
    assert int(got[1]) == t and got[2].shape == (1, t)  # past PASS_ROWS (ratio 2.5, S > 25) from Python
    assert not bool(torch.isin(got[2], bad).any())


def test_ctc_decode_of_one_sentence_takes_the_pass_and_writes_the_reference_translation():
    from attnkit.generation.ctc_nat import ctc_decode

    for ratio in (1.5, 2.0):
        fast = ctc(ratio, seed=1)
        calls = []
        fast.first_pass = lambda *a, first=fast.first_pass, calls=calls, **k: calls.append(1) or first(*a, **k)
        for s in (1, 7, 20):
            ids = torch.randint(3, 40, (1, s), generator=torch.Generator().manual_seed(s))
            for penalty in (0.0, 3.0):
                got = ctc_decode(fast, ids, blank_penalty=penalty)
                want = ctc_decode(fast.reference, ids, blank_penalty=penalty)
                assert torch.equal(got.sequences, want.sequences) and got.candidate_lengths.tolist() == [[
                    ctc_row_length(s, fast.config)]]
                torch.testing.assert_close(got.sequences_scores, want.sequences_scores, atol=1e-5, rtol=1e-5)
        assert len(calls) == 6
        assert ctc_decode(fast, torch.randint(3, 40, (2, 5))).sequences.shape[0] == 2 and len(calls) == 6  # a batch
