"""Seq2SeqEngine (the inference engine the decoders run) against the reference Seq2SeqModel: the same logits step by
step and the same tokens from generate, for pre-LN and post-LN stacks, padded sources, beams, long outputs (the
K/V buffers grow), multi-token prefixes, bfloat16 weights."""

import copy

import pytest
import torch

from attnkit.functional import native
from attnkit.generation import generate
from attnkit.inference import Seq2SeqEngine, StepCache, engine_for, onednn_available, refusal
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from attnkit.nn import TransformerConfig
from tests.inference.engines import engine_of, padded_source, spread
from tests.markers import needs_native

pytestmark = [pytest.mark.usefixtures("cpu_variant"),
              pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops"),
              pytest.mark.usefixtures("one_thread")]


def model(norm_first: bool, activation="silu", positional="sinusoidal", dtype=torch.float32, seed=0, d_model=32):
    tc = TransformerConfig(d_model=d_model, num_heads=2, d_ff=48, num_encoder_layers=2, num_decoder_layers=2,
                           dropout=0.0, norm_first=norm_first, activation=activation, positional=positional,
                           max_len=128)
    cfg = Seq2SeqConfig(30, 30, tc, pad_token_id=0, bos_token_id=1, eos_token_id=2, final_logits_bias=True,
                        max_positions=128)
    torch.manual_seed(seed)
    m = spread(Seq2SeqModel(cfg).eval())
    with torch.no_grad():
        m.final_logits_bias.normal_()
    return m.to(dtype)


def source():
    return padded_source(3)


def encoded(norm_first=False):
    """A model, its fast copy, a padded source, its mask and the encoder's output."""
    m = model(norm_first)
    ids, mask = source()
    return m, engine_of(m, Seq2SeqEngine), ids, mask, m.encode(ids, mask)


@pytest.mark.parametrize("norm_first,activation,positional", [(False, "silu", "sinusoidal"), (True, "relu", "learned"),
                                                              (True, "gelu", "sinusoidal")])
def test_steps_give_the_reference_logits(norm_first, activation, positional):
    m = model(norm_first, activation, positional)
    fast = engine_of(m, Seq2SeqEngine)
    ids, mask = source()
    memory = m.encode(ids, mask)
    torch.testing.assert_close(fast.encode(ids, mask), memory, atol=1e-5, rtol=1e-5)
    tokens = torch.randint(3, 30, (3, 40))  # longer than the first buffer (32): it grows
    cache = None
    ref_cache = None
    for t in range(tokens.shape[1]):
        out = fast.decode_step(tokens[:, t:t + 1], memory, mask, cache)
        ref = m.decode_step(tokens[:, t:t + 1], memory, mask, ref_cache)
        cache, ref_cache = out.cache, ref.cache
        torch.testing.assert_close(out.logits, ref.logits, atol=2e-5, rtol=1e-5)
    assert isinstance(cache, StepCache) and cache.length == 40 and cache.keys[0].shape[0] == 64


def test_a_prefix_is_fed_token_by_token():
    m, fast, ids, mask, memory = encoded()
    prefix = torch.randint(3, 30, (3, 5))
    out = fast.decode_step(prefix, memory, mask, None)
    ref = m.decode_step(prefix, memory, mask, None, use_cache=False)
    torch.testing.assert_close(out.logits, ref.logits, atol=2e-5, rtol=1e-5)
    assert out.cache.length == 5


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("num_beams", [1, 3])
def test_generate_gives_the_reference_tokens(norm_first, num_beams):
    m = model(norm_first, seed=3)
    ids, mask = source()
    kw = dict(max_new_tokens=45, num_beams=num_beams)
    ref = generate(m, ids, mask, **kw)
    out = generate(engine_of(m, Seq2SeqEngine), ids, mask, **kw)
    assert torch.equal(out.sequences, ref.sequences)
    torch.testing.assert_close(out.sequences_scores, ref.sequences_scores, atol=1e-4, rtol=1e-4)
    fast = engine_of(m, Seq2SeqEngine)
    with_attention = generate(fast, ids, mask, output_attentions=True, **kw)  # the reference path
    assert torch.equal(with_attention.sequences, ref.sequences)


def test_bfloat16_weights_stay_close_to_float32():
    m = model(False)
    ids, mask = source()
    memory = m.encode(ids, mask)
    fast = engine_of(model(False, dtype=torch.bfloat16), Seq2SeqEngine)
    tok = torch.randint(3, 30, (3, 1))
    got = fast.decode_step(tok, fast.encode(ids, mask), mask, None).logits
    assert got.dtype == torch.bfloat16
    ref = m.decode_step(tok, memory, mask, None).logits
    assert (got.float() - ref).abs().max() < 0.1 * ref.abs().max()


def test_unsupported_models_are_refused():
    m = model(False, positional="rope")
    assert "positions inside attention (rope)" in refusal(m)
    assert engine_for(m) is m  # the reference modules run it


def test_beams_share_their_sentence_cross_attention_rows():
    m, fast, ids, mask, memory = encoded()
    tok = torch.randint(3, 30, (3, 1))
    cache = fast.decode_step(tok, memory, mask, None).cache
    ref_cache = m.decode_step(tok, memory, mask, None).cache
    rows = torch.arange(3).repeat_interleave(4)  # each sentence becomes 4 beams
    cache = fast.reorder_cache(cache, rows)
    assert cache.group == 4 and cache.cross_keys[0].shape[0] == 3  # not copied 4 times
    ref_cache = m.reorder_cache(ref_cache, rows)
    tok = torch.randint(3, 30, (12, 1))
    out = fast.decode_step(tok, memory[rows], mask[rows], cache)
    ref = m.decode_step(tok, memory[rows], mask[rows], ref_cache)
    torch.testing.assert_close(out.logits, ref.logits, atol=2e-5, rtol=1e-5)
    keep = torch.tensor([0, 5, 11])  # any other move: one cross-attention row per row again
    out = fast.decode_step(tok[keep], memory[rows][keep], mask[rows][keep], fast.reorder_cache(out.cache, keep))
    ref = m.decode_step(tok[keep], memory[rows][keep], mask[rows][keep], m.reorder_cache(ref.cache, keep))
    assert out.cache.group == 1
    torch.testing.assert_close(out.logits, ref.logits, atol=2e-5, rtol=1e-5)


def test_a_finished_decoding_leaves_its_buffers_to_the_next():
    m, fast, ids, mask, memory = encoded()
    tok = torch.randint(3, 30, (3, 1))
    cache = fast.decode_step(tok, memory, mask, None).cache
    cache = fast.reorder_cache(cache, torch.tensor([2, 0, 1]))
    out = fast.decode_step(tok, memory, mask, cache)
    assert fast._pool == []  # its caches are alive: nothing is pooled
    kept = {id(t) for t in out.cache.keys + out.cache.values + (out.cache.spare or [])}
    logits = out.logits
    del cache, out
    assert {id(t) for t in fast._pool} == kept  # the buffers in use at its end, and no others
    again = fast.decode_step(tok, memory, mask, None)
    taken = again.cache.keys + again.cache.values
    assert {id(t) for t in taken} <= kept and len(fast._pool) == len(kept) - len(taken)
    ref = m.decode_step(tok, memory, mask, None).logits
    torch.testing.assert_close(again.logits, ref, atol=2e-5, rtol=1e-5)
    # the reused buffers held the other decoding's keys: the results do not depend on them
    beams = dict(max_new_tokens=40, num_beams=3)
    first, second = generate(fast, ids, mask, **beams), generate(fast, ids, mask, **beams)
    assert torch.equal(first.sequences, second.sequences)
    assert torch.equal(first.sequences, generate(m, ids, mask, **beams).sequences)
    assert logits.shape == (3, 30)


def test_buffers_of_another_batch_size_in_the_pool_are_passed_over():
    # a batch whose sentences end at different steps leaves buffers of several batch sizes; a later
    # decoding of one sentence must find its own (a tensor in the pool is never compared with ==)
    m, fast, ids, mask, memory = encoded()
    generate(fast, ids, mask, max_new_tokens=40)
    fast._pool[:] = [memory.new_empty(32, 3, 2, 16), *fast._pool, *(memory.new_empty(32, 1, 2, 16) for _ in range(4))]
    one = generate(fast, ids[:1], mask[:1], max_new_tokens=40).sequences
    assert torch.equal(one, generate(m, ids[:1], mask[:1], max_new_tokens=40).sequences)


@needs_native
@pytest.mark.parametrize("norm_first,activation", [(False, "silu"), (True, "gelu")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("beams", [2, 3])
def test_the_native_layer_step_gives_the_python_sequence_logits(norm_first, activation, dtype, beams):
    """Steps run each decoder layer in one native call (decoder_layer_step: W blocked up to 4 rows, in panels
    past them); the Python sequence of small_linear / oneDNN / short kernels is its reference. Two sentences x 2
    or 3 beams (rows sharing their sentence's memory), one source padded, buffers that grow, beams moved (read
    through the row table)."""
    if dtype == torch.bfloat16 and not native.kernel().cpu_has_bf16():
        pytest.skip("bfloat16 attention kernel needs AVX512-BF16")
    m = model(norm_first, activation, dtype=dtype, d_model=64)  # heads of 32: the bfloat16 kernel's multiple
    fast, slow = engine_of(m, Seq2SeqEngine), engine_of(m, Seq2SeqEngine)
    assert fast.native_step is not None
    slow.native_step = None
    # bfloat16: the native step keeps a pre-LN norm's output in float32 where the Python sequence rounds it,
    # so each is held to float32's logits (the same weights, the Python sequence): the native step at least
    # as close as the Python sequence
    exact = engine_of(copy.deepcopy(m).float(), Seq2SeqEngine) if dtype == torch.bfloat16 else None
    if exact is not None:
        exact.native_step = None
    ids, mask = source()
    ids, mask = ids[1:], mask[1:]  # (2, 7), both padded
    memory = fast.encode(ids, mask)
    errors = []

    def compare(a, b, c):
        if c is None:
            torch.testing.assert_close(a.logits, b.logits, atol=5e-5, rtol=1e-5)  # summation orders, 37 steps
            return
        errors.append(((a.logits.float() - c.logits).abs().mean(), (b.logits.float() - c.logits).abs().mean(),
                       c.logits.abs().mean()))

    tok0 = torch.randint(3, 30, (2, 1))
    out_a, out_b = fast.decode_step(tok0, memory, mask, None), slow.decode_step(tok0, memory, mask, None)
    out_c = None if exact is None else exact.decode_step(tok0, exact.encode(ids, mask), mask, None)
    compare(out_a, out_b, out_c)
    index = torch.arange(2).repeat_interleave(beams)  # every sentence into its beams
    cache_a, cache_b = fast.reorder_cache(out_a.cache, index), slow.reorder_cache(out_b.cache, index)
    cache_c = None if exact is None else exact.reorder_cache(out_c.cache, index)
    assert cache_a.group == beams
    g = torch.Generator().manual_seed(0)
    for step in range(36):  # past the first buffer's 32 steps
        if step % 7 == 6:  # beams move within their sentence
            moved = (torch.arange(2)[:, None] * beams + torch.randint(0, beams, (2, beams), generator=g)).view(-1)
            cache_a, cache_b = fast.reorder_cache(cache_a, moved, cross=False), slow.reorder_cache(cache_b, moved,
                                                                                                 cross=False)
            cache_c = None if exact is None else exact.reorder_cache(cache_c, moved, cross=False)
        tok = torch.randint(3, 30, (2 * beams, 1))
        out_a, out_b = fast.decode_step(tok, memory, mask, cache_a), slow.decode_step(tok, memory, mask, cache_b)
        cache_a, cache_b = out_a.cache, out_b.cache
        if exact is not None:
            out_c = exact.decode_step(tok, exact.encode(ids, mask), mask, cache_c)
            cache_c = out_c.cache
        compare(out_a, out_b, out_c)
    assert out_a.logits.abs().max() > 0.1
    if errors:
        native_error, python_error, size = (sum(e) / len(errors) for e in zip(*errors))
        assert native_error <= 1.1 * python_error and native_error < 0.05 * size


@needs_native
def test_the_native_layer_step_is_not_used_where_its_conditions_fail(monkeypatch):
    import attnkit.inference.seq2seq as engine

    m = model(False)
    fast = engine_of(m, Seq2SeqEngine)
    calls = []
    step = fast.native_step

    def counted(*args):
        calls.append(args[0].shape[0])
        return step(*args)

    fast.native_step = counted
    ids, mask = source()
    generate(fast, ids, mask, min_new_tokens=3, max_new_tokens=3)  # 3 rows: every layer of every step
    assert calls == [3] * (3 * len(fast.layers))
    calls.clear()
    # 2 beams: the first step has 3 rows (beams expand after it), the next ones 6 (W in panels)
    generate(fast, ids, mask, min_new_tokens=3, max_new_tokens=3, num_beams=2)
    assert calls == [3] * len(fast.layers) + [6] * (2 * len(fast.layers))
    calls.clear()
    limit = ids.shape[1]  # the source's length: the steps past it run the Python sequence
    monkeypatch.setattr(engine, "SHORT_MAX_LEN", limit)
    generate(fast, ids, mask, min_new_tokens=limit + 2, max_new_tokens=limit + 2)
    assert calls == [3] * (limit * len(fast.layers))


def test_beam_moves_copy_no_keys_where_the_kernel_reads_through_rows():
    """Where the step's kernels run, a move reorders the cache's row table and copies no key; the steps after
    moves (several in a row, rows leaving) give the reference's logits."""
    m, fast, ids, mask, memory = encoded()
    if fast.attend.kernel is None:
        pytest.skip("the short kernel does not run here: moves copy the rows")
    tok = torch.randint(3, 30, (3, 1))
    out, ref = fast.decode_step(tok, memory, mask, None), m.decode_step(tok, memory, mask, None)
    for index in (torch.tensor([2, 0, 0]), torch.tensor([1, 1, 2]), torch.tensor([2, 0])):
        cache = fast.reorder_cache(out.cache, index)
        assert cache.keys[0] is out.cache.keys[0] and cache.rows is not None  # the same buffers
        memory, mask = memory[index], mask[index]
        tok = torch.randint(3, 30, (len(index), 1))
        out = fast.decode_step(tok, memory, mask, cache)
        ref = m.decode_step(tok, memory, mask, m.reorder_cache(ref.cache, index))
        torch.testing.assert_close(out.logits, ref.logits, atol=2e-5, rtol=1e-5)
    assert out.cache.rows.shape[0] == 2 and out.cache.keys[0].shape[1] == 3  # 2 rows read from 3


def test_past_the_kernels_lengths_the_rows_are_put_back_in_order(monkeypatch):
    """A cache moved by its row table whose step would run past the length the engine's kernels take is copied
    back in order once (``cache.flatten``); beam search still gives the reference's tokens."""
    import attnkit.inference.seq2seq as engine

    monkeypatch.setattr(engine, "SHORT_MAX_LEN", 6)
    m = model(False, seed=3)
    ids, mask = source()
    kw = dict(max_new_tokens=12, min_new_tokens=12, num_beams=3)
    fast = engine_of(m, Seq2SeqEngine)
    assert torch.equal(generate(fast, ids, mask, **kw).sequences, generate(m, ids, mask, **kw).sequences)
