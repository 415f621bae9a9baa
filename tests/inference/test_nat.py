"""NATEngine (the inference engine NAT runs decode with) against the reference NATModel: the same hidden states and
logits for padded sources and rows, pre-LN and post-LN, both length strategies, and the same Mask-Predict output."""

import copy

import pytest
import torch

import attnkit.inference.nat as nat_module
from attnkit.generation import mask_predict
from attnkit.generation.ctc_nat import ctc_decode
from attnkit.inference import LAYER_ROWS, NATEngine, engine_for, onednn_available, refusal
from attnkit.inference.nat import PASS_ROWS
from attnkit.inference.seq2seq import Seq2SeqEngine
from attnkit.models.nat import NATConfig, NATModel
from attnkit.nn import TransformerConfig
from tests.inference.engines import engine_of, padded_source, spread
from tests.markers import needs_native

pytestmark = [pytest.mark.usefixtures("cpu_variant"),
              pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops"),
              pytest.mark.usefixtures("one_thread")]


def model(norm_first: bool, length="classifier", activation="relu", positional="sinusoidal", seed=0, d_model=32,
          vocab=30, decoder_layers=2, nat_loss="mask-predict", ctc_upsample=2):
    tc = TransformerConfig(d_model=d_model, num_heads=2, d_ff=48, num_encoder_layers=2,
                           num_decoder_layers=decoder_layers, dropout=0.0, norm_first=norm_first,
                           activation=activation, positional=positional, max_len=64)
    cfg = NATConfig(vocab, vocab, tc, share_embeddings=True, max_positions=64, length=length, max_length_offset=4,
                    nat_loss=nat_loss, ctc_upsample=ctc_upsample)
    torch.manual_seed(seed)
    return spread(NATModel(cfg).eval())


def nat_engine(m) -> NATEngine:
    return engine_of(m, NATEngine)


def source():
    return padded_source(4)


@pytest.mark.parametrize("norm_first,activation,positional", [(True, "relu", "sinusoidal"), (False, "gelu", "learned"),
                                                              (True, "silu", "none")])
def test_a_parallel_pass_gives_the_reference_hidden_states(norm_first, activation, positional):
    m = model(norm_first, activation=activation, positional=positional)
    fast = nat_engine(m)
    ids, mask = source()
    memory = m.encode(ids, mask)
    torch.testing.assert_close(fast.encode(ids, mask), memory, atol=1e-5, rtol=1e-5)
    tokens = torch.randint(3, 30, (3, 9))
    lengths = torch.tensor([9, 5, 1])  # padded rows: positions past a row's length are hidden from the others
    out = fast.decode_parallel(tokens, memory, mask, lengths, use_cache=True)
    with torch.no_grad():
        ref = m.decode_parallel(tokens, memory, mask, lengths).last_hidden_state
    keep = torch.arange(9)[None] < lengths[:, None]
    torch.testing.assert_close(out.last_hidden_state[keep], ref[keep], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(fast.output_logits(out.last_hidden_state[keep]), m.output_logits(ref[keep]),
                               atol=5e-5, rtol=1e-5)
    again = fast.decode_parallel(tokens, memory, mask, lengths, cache=out.cache)  # the cross keys from the cache
    torch.testing.assert_close(again.last_hidden_state, out.last_hidden_state, atol=0, rtol=0)
    one = fast.decode_parallel(tokens[:1], memory[:1], mask[:1])  # batch 1, no lengths: no mask at all
    torch.testing.assert_close(one.last_hidden_state[0], out.last_hidden_state[0], atol=2e-5, rtol=1e-5)


@needs_native
@pytest.mark.parametrize("norm_first,activation,positional", [(True, "relu", "sinusoidal"), (False, "gelu", "learned")])
def test_unpadded_sources_run_the_native_encoder_and_the_short_length_classifier(norm_first, activation, positional):
    m = model(norm_first, activation=activation, positional=positional)
    fast = nat_engine(m)
    base = fast.base
    assert base.encoder.all_native
    calls, native_encode = [], base.encode_unpadded
    base.encode_unpadded = lambda i: calls.append(tuple(i.shape)) or native_encode(i)
    ids = torch.randint(4, 30, (2, 7))
    ones = torch.ones_like(ids)
    padded = ones.clone()
    padded[1, 5:] = 0
    with torch.no_grad():
        ref = m.encode(ids, ones)
        for mask in (None, ones, ones.bool()):
            torch.testing.assert_close(fast.encode(ids, mask), ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(fast.encode(ids, padded), m.encode(ids, padded), atol=1e-5, rtol=1e-5)
        long = torch.randint(4, 30, (5, 7))  # 35 positions, more than LAYER_ROWS: the encoder module
        torch.testing.assert_close(fast.encode(long), m.encode(long), atol=1e-5, rtol=1e-5)
        for k in (1, 3, 99):  # without a mask: the reference's candidates, in its order
            for mask in (None, ones):
                assert torch.equal(fast.length_candidates(ref, None, k), m.length_candidates(ref, mask, k))
        # the layers in one call (layers_forward), or one call each: the same kernels, the same memory
        each = copy.copy(base)
        each.encoder = copy.copy(base.encoder)
        each.encoder.stack_kernel = None
        assert base.encoder.stack_kernel is not None and torch.equal(Seq2SeqEngine.encode_unpadded(base, ids),
                                                                     Seq2SeqEngine.encode_unpadded(each, ids))
    assert calls == [(2, 7)] * 3


def test_a_sentence_alone_gives_its_row_of_a_padded_batch():
    m = model(True)
    fast = nat_engine(m)
    ids, mask = source()
    with torch.no_grad():
        batch = mask_predict(fast, ids, mask, iterations=1, length_candidates=1)
        for i in range(ids.shape[0]):
            n = int(mask[i].sum())
            one = mask_predict(fast, ids[i:i + 1, :n], mask[i:i + 1, :n], iterations=1, length_candidates=1)
            w = one.sequences.shape[1]  # start, tokens, END: written directly for a full row
            assert torch.equal(one.sequences[0], batch.sequences[i, :w])
            assert bool((batch.sequences[i, w:] == m.config.pad_token_id).all())
            assert int(one.lengths[0]) == int(batch.lengths[i]) == w - 1
            torch.testing.assert_close(one.sequences_scores[0], batch.sequences_scores[i], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False])
def test_padded_rows_run_the_layers_on_their_own_positions(norm_first, monkeypatch):
    """Rows of a batch past the native layers (B * T > LAYER_ROWS) with padding: the products and norms take only
    the rows' positions (N of B * T), the same hidden states there as the whole grid, 0 past each row."""
    m = model(norm_first)
    fast = nat_engine(m)
    ids, mask = source()
    ids, mask = ids.repeat(4, 1), mask.repeat(4, 1)  # (12, 7)
    memory = fast.encode(ids, mask)
    tokens = torch.randint(3, 30, (12, 9))
    lengths = torch.tensor([9, 5, 1, 8] * 3)  # 69 of 108 positions
    rows = []
    qkv = fast.base.layers[0].qkv
    rows_of = qkv.rows
    monkeypatch.setattr(qkv, "rows", lambda x: rows.append(x.shape[0]) or rows_of(x))
    packed = fast.decode_parallel(tokens, memory, mask, lengths).last_hidden_state
    monkeypatch.setattr(nat_module, "PACK_FROM", 2.0)  # never: the whole grid
    grid = fast.decode_parallel(tokens, memory, mask, lengths).last_hidden_state
    assert rows == [69, 108]
    keep = torch.arange(9)[None] < lengths[:, None]
    torch.testing.assert_close(packed[keep], grid[keep], atol=1e-6, rtol=1e-6)
    assert bool((packed[~keep] == 0).all())
    with torch.no_grad():
        ref = m.decode_parallel(tokens, memory, mask, lengths).last_hidden_state
    torch.testing.assert_close(packed[keep], ref[keep], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False])
def test_rows_of_mask_tokens_start_from_the_first_layers_block_of_their_length(norm_first, monkeypatch):
    """A first pass (mask tokens only) past the native layers: the first layer's self-attention block comes from
    ``mask_block`` (made once per row length), the same states as every layer run; other tokens run every layer."""
    m = model(norm_first)
    fast = nat_engine(m)
    ids, mask = source()
    ids, mask = ids.repeat(4, 1), mask.repeat(4, 1)  # (12, 7)
    memory = fast.encode(ids, mask)
    masks = torch.full((12, 9), m.config.mask_id)
    lengths = torch.tensor([9, 5, 1, 8] * 3)
    qkv = fast.base.layers[0].qkv
    rows, rows_of = [], qkv.rows
    monkeypatch.setattr(qkv, "rows", lambda x: rows.append(x.shape[0]) or rows_of(x))
    got = [fast.decode_parallel(masks, memory, mask, lengths).last_hidden_state,
           fast.decode_parallel(masks, memory, mask).last_hidden_state]  # padded rows, and whole rows
    assert rows == [9, 5, 1, 8] and sorted(fast._mask_blocks) == [1, 5, 8, 9]  # each length's block once
    monkeypatch.setattr(nat_module, "MASK_BLOCKS", False)
    want = [fast.decode_parallel(masks, memory, mask, lengths).last_hidden_state,
            fast.decode_parallel(masks, memory, mask).last_hidden_state]
    keep = torch.arange(9)[None] < lengths[:, None]
    torch.testing.assert_close(got[0][keep], want[0][keep], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=1e-5)
    monkeypatch.setattr(nat_module, "MASK_BLOCKS", True)
    rows.clear()
    fast.decode_parallel(masks.index_fill(1, torch.tensor([0]), 5), memory, mask, lengths)  # a token: every layer
    assert rows == [69]
    with torch.no_grad():
        ref = m.decode_parallel(masks, memory, mask, lengths).last_hidden_state
    torch.testing.assert_close(got[0][keep], ref[keep], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first,activation", [(True, "relu"), (False, "gelu")])
def test_the_native_layers_give_the_python_sequence(norm_first, activation):
    """At up to LAYER_ROWS positions the decoder's layers are one native call (layers_forward), or one each
    (layer_forward): the same hidden states as each other, and as the Python sequence (``_layers``, their
    reference), padded rows and sources included."""
    m = model(norm_first, activation=activation)
    fast = nat_engine(m)
    if fast.layer_kernel is None or fast.stack_kernel is None:
        pytest.skip("the native layers do not run here")
    reference, each = copy.copy(fast), copy.copy(fast)
    reference.layer_kernel = None
    each.stack_kernel = None
    calls, stacks, kernel, stack = [], [], fast.layer_kernel, fast.stack_kernel
    each.layer_kernel = lambda *a: calls.append(a[0].shape) or kernel(*a)
    fast.stack_kernel = lambda *a: stacks.append((a[0].shape, len(a[1]), len(a[3]))) or stack(*a)
    ids, mask = source()
    memory = fast.encode(ids, mask)
    tokens, lengths = torch.randint(3, 30, (2, 6)), torch.tensor([6, 4])  # 12 rows; row 1's source is padded
    got = fast.decode_parallel(tokens, memory[1:], mask[1:], lengths).last_hidden_state
    one_by_one = each.decode_parallel(tokens, memory[1:], mask[1:], lengths).last_hidden_state
    ref = reference.decode_parallel(tokens, memory[1:], mask[1:], lengths).last_hidden_state
    keep = torch.arange(6)[None] < lengths[:, None]
    assert torch.equal(got[keep], one_by_one[keep])  # the same kernels in the same order
    torch.testing.assert_close(got[keep], ref[keep], atol=2e-5, rtol=1e-5)
    assert calls == [(2, 6, 32)] * 2 and stacks == [((2, 6, 32), 2, 2)]  # two layers: two calls, or one
    fast.decode_parallel(torch.randint(3, 30, (3, PASS_ROWS // 3 + 1)), memory, mask)  # > PASS_ROWS: Python
    assert len(stacks) == 1


def test_a_row_of_twice_a_sentence_runs_the_native_layers():
    """A CTC row (2 x S positions, past LAYER_ROWS, up to PASS_ROWS) runs the decoder's layers natively: the
    reference's hidden states; one position more than PASS_ROWS runs the Python sequence."""
    m = model(True, activation="relu")
    fast = nat_engine(m)
    if fast.stack_kernel is None:
        pytest.skip("the native layers do not run here")
    stacks, stack = [], fast.stack_kernel
    fast.stack_kernel = lambda *a: stacks.append(a[0].shape) or stack(*a)
    ids = torch.randint(4, 30, (1, 25))
    memory = fast.encode(ids)
    for t in (LAYER_ROWS + 1, 2 * 25, PASS_ROWS, PASS_ROWS + 1):
        tokens = torch.full((1, t), m.config.mask_id)
        got = fast.decode_parallel(tokens, memory).last_hidden_state
        with torch.no_grad():
            ref = m.decode_parallel(tokens, memory).last_hidden_state
        torch.testing.assert_close(got, ref, atol=2e-5, rtol=1e-5)
    assert stacks == [(1, LAYER_ROWS + 1, 32), (1, 50, 32), (1, PASS_ROWS, 32)]


@pytest.mark.parametrize("length,iterations,k", [("classifier", 1, 1), ("classifier", 4, 3), ("end", 3, 1)])
def test_mask_predict_gives_the_reference_translation(length, iterations, k):
    m = model(True, length=length)
    ids, mask = source()
    ref = mask_predict(m, ids, mask, iterations=iterations, length_candidates=k)
    out = mask_predict(nat_engine(m), ids, mask, iterations=iterations, length_candidates=k)
    assert torch.equal(out.sequences, ref.sequences) and torch.equal(out.lengths, ref.lengths)
    torch.testing.assert_close(out.sequences_scores, ref.sequences_scores, atol=1e-5, rtol=1e-5)


def test_length_candidates_share_their_sentences_projected_memory(monkeypatch):
    m = model(True)
    fast = nat_engine(m)
    ids, mask = source()
    seen = []
    cross_cache = fast.cross_cache
    monkeypatch.setattr(fast, "cross_cache", lambda memory: seen.append(memory.shape[0]) or cross_cache(memory))
    out = mask_predict(fast, ids, mask, iterations=2, length_candidates=3)
    assert seen == [3]  # the 3 sentences' memory, once: not 9 candidate rows
    ref = mask_predict(m, ids, mask, iterations=2, length_candidates=3)
    assert torch.equal(out.sequences, ref.sequences)
    torch.testing.assert_close(out.sequences_scores, ref.sequences_scores, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False])
def test_ctc_decoding_gives_the_reference_translation(norm_first):
    """A CTC-trained model (no length classifier, a row of 2 x S mask tokens): the engine's one pass gives the
    model's tokens, padded batch and single sentences alike."""
    m = model(norm_first, nat_loss="ctc")
    fast = engine_for(m)
    assert isinstance(fast, NATEngine) and fast.length is None
    torch.manual_seed(0)
    ids, mask = source()
    ref = ctc_decode(m, ids, mask)
    out = ctc_decode(fast, ids, mask)
    rows = ref.candidate_lengths[:, 0]  # (B,) 2 x S
    tokens = torch.ones(3, 14, dtype=torch.long).masked_fill(torch.arange(14) >= rows[:, None], 0)
    with torch.no_grad():  # every position's logits before the collapse
        logits = [e.output_logits(e.decode_parallel(tokens, e.encode(ids, mask), mask, rows).last_hidden_state)
                  for e in (m, fast)]
    real = torch.arange(14) < rows[:, None]
    torch.testing.assert_close(logits[1][real], logits[0][real], atol=1e-4, rtol=1e-4)
    assert torch.equal(out.sequences, ref.sequences) and torch.equal(out.lengths, ref.lengths)
    assert out.candidate_lengths.tolist() == [[14], [8], [4]]
    torch.testing.assert_close(out.sequences_scores, ref.sequences_scores, atol=1e-5, rtol=1e-5)
    for i in range(3):
        one = ids[i:i + 1, :int(mask[i].sum())]
        assert torch.equal(ctc_decode(fast, one).sequences, ctc_decode(m, one).sequences)


@pytest.mark.parametrize("iterations", [1, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_sentence_takes_the_first_pass_and_gives_the_reference_translation(iterations, dtype):
    m = model(True, d_model=64).to(dtype)  # heads of 32: bfloat16's native layers
    fast, general = nat_engine(m), nat_engine(m)
    native = fast.layer_kernel is not None  # bfloat16's needs AVX512-BF16
    general.first_pass = lambda *a, **k: None  # the steps one by one (mask_predict's own loop)
    taken = []
    first_pass = fast.first_pass
    fast.first_pass = lambda *a, **k: taken.append(first_pass(*a, **k)) or taken[-1]
    for seed in range(4):
        torch.manual_seed(seed)
        ids = torch.randint(4, 30, (1, 3 + 2 * seed))
        out = mask_predict(fast, ids, torch.ones_like(ids), iterations=iterations, length_candidates=1)
        same = mask_predict(general, ids, iterations=iterations, length_candidates=1)  # the same calls, but the
        assert torch.equal(out.sequences, same.sequences)  # decoder's last norm inside the output layer's kernel
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(out.sequences_scores, same.sequences_scores, atol=tol, rtol=tol)
        if dtype == torch.float32:  # bfloat16 rounds differently from the reference model's products
            ref = mask_predict(m, ids, iterations=iterations, length_candidates=1)
            assert torch.equal(out.sequences, ref.sequences) and torch.equal(out.lengths, ref.lengths)
            torch.testing.assert_close(out.sequences_scores, ref.sequences_scores, atol=1e-5, rtol=1e-5)
        if not native:
            assert taken[-1] is None
            continue
        memory, lengths, tokens, logp, cache = taken[-1]
        assert torch.equal(lengths, m.length_candidates(m.encode(ids), None, 1))
        assert tokens.shape == logp.shape == (1, int(lengths)) and logp.dtype == torch.float32
        assert (cache is None) == (iterations == 1)
    if not native:
        return
    assert len(taken) == 4
    ids = torch.randint(4, 30, (2, 5))  # a batch, or several length candidates: the general path
    mask_predict(fast, ids, iterations=1, length_candidates=1)
    assert len(taken) == 5 and taken[-1] is None  # asked, and it declines a batch
    mask_predict(fast, ids[:1], iterations=1, length_candidates=2)
    assert len(taken) == 5  # not asked


@needs_native
def test_the_first_pass_of_a_row_longer_than_the_native_layers_take():
    m = model(True)
    with torch.no_grad():
        m.length_head.bias[-1] = 1e4  # always the longest: T = S + 4 > LAYER_ROWS for S = LAYER_ROWS
    ids = torch.randint(4, 30, (1, LAYER_ROWS))
    fast = nat_engine(m)
    _, lengths, tokens, _, _ = fast.first_pass(ids, torch.tensor([0, 1, 2]))
    assert int(lengths) == LAYER_ROWS + 4 and tokens.shape == (1, LAYER_ROWS + 4)
    ref = mask_predict(m, ids, iterations=1, length_candidates=1)
    assert torch.equal(mask_predict(fast, ids, iterations=1, length_candidates=1).sequences, ref.sequences)


def test_unsupported_models_are_refused():
    m = model(True, positional="alibi")
    assert "positions inside attention (alibi)" in refusal(m)
    assert engine_for(m) is m  # the reference modules run it
    m = model(True)
    with pytest.raises(ValueError, match="`lengths` must be"):
        nat_engine(m).decode_parallel(torch.randint(3, 30, (1, 4)), torch.zeros(1, 3, 32), lengths=torch.tensor([5]))
