"""int8 as a dtype of the weight spec: the quantisation (round trip bound, per-channel scales, zero rows), the
int8 linear layer against the exact integer reference (each path), and a spec in int8 through the engines."""

import pytest
import torch
import torch.nn.functional as F

from attnkit.inference import BertEngine, Seq2SeqEngine, engine_for, onednn_available
from attnkit.inference.quant import (
    ACT_MAX,
    cat_rows,
    dequantize,
    int8_linear_reference,
    int8_product_reference,
    outlier_channels,
    outliers,
    quantize_linear,
    quantize_rows,
    quantize_spec,
    quantize_weight,
)
from attnkit.inference.quant_linear import QuantLayer, QuantLinear, _fbgemm_sums, _pack, fbgemm_runs
from attnkit.inference.spec import Linear
from tests.inference.test_encoder import _bert
from tests.inference.test_seq2seq import model as seq2seq_model
from tests.inference.test_seq2seq import source

pytestmark = pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops")
needs_fbgemm = pytest.mark.skipif(not fbgemm_runs(), reason="torch's fbgemm int8 GEMM does not run here")


def _linear(n=24, k=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Linear(torch.randn(n, k, generator=g), torch.randn(n, generator=g))


def test_weights_round_trip_within_half_a_step_per_channel():
    w = torch.randn(6, 50) * torch.tensor([1e-3, 0.1, 1.0, 10.0, 100.0, 1.0])[:, None]  # rows of every size
    q, scale = quantize_weight(w)
    assert q.dtype == torch.int8 and scale.shape == (6,)
    torch.testing.assert_close(scale, w.abs().amax(1) / 127)  # one scale per output channel
    assert (q.abs().amax(1) == 127).all()  # each row's largest |w| maps to 127
    err = (dequantize(q, scale) - w).abs()
    assert (err <= scale[:, None] / 2 * (1 + 1e-6)).all()


def test_zero_rows_quantise_to_zero_with_scale_one():
    w = torch.randn(3, 8)
    w[1] = 0
    q, scale = quantize_weight(w)
    assert scale[1] == 1 and (q[1] == 0).all()
    x = torch.randn(4, 8)
    x[2] = 0
    x[3] = 1.5  # a row of one value: its shift alone
    a, s, c = quantize_rows(x)
    assert s[2, 0] == 0 and c[2, 0] == 0 and (a[2] == 0).all() and a.abs().max() == ACT_MAX
    assert s[3, 0] == 0 and c[3, 0] == 1.5 and (a[3] == 0).all()
    lin = quantize_linear(Linear(w, torch.arange(3.0)))
    y = int8_linear_reference(x, lin)
    torch.testing.assert_close(y[2], torch.arange(3.0))  # a zero row gives the bias
    torch.testing.assert_close(y[3], 1.5 * dequantize(lin.weight, lin.scale).sum(1) + torch.arange(3.0))
    assert (y[:, 1] == 1).all()  # a zero weight row gives its bias


def test_activations_are_quantised_per_row_over_its_range():
    x = torch.randn(5, 30) * torch.tensor([1e-4, 1.0, 1e4, 3.0, 0.5])[:, None]
    x[3] = x[3].abs() + 2  # a lopsided row: every value positive
    a, s, c = quantize_rows(x)
    assert (a.amax(1) == ACT_MAX).all() and (a.amin(1) == -ACT_MAX).all() and torch.equal(a, a.round())
    assert ((a * s + c - x).abs() <= s / 2 * (1 + 1e-5)).all()
    torch.testing.assert_close(c[:, 0], (x.amax(1) + x.amin(1)) / 2)
    a, s, c = quantize_rows(x, 127, torch.tensor([4, 9]))  # two channels left out: a = 0 there, not in the range
    assert (a[:, [4, 9]] == 0).all()
    keep = torch.ones(30, dtype=torch.bool)
    keep[[4, 9]] = False
    torch.testing.assert_close(c[:, 0], (x[:, keep].amax(1) + x[:, keep].amin(1)) / 2)


@pytest.mark.parametrize("path", ["reference", pytest.param("fbgemm", marks=needs_fbgemm)])
def test_a_nan_row_stays_nan(path):
    x = torch.randn(3, 16)
    x[1, 4] = float("nan")
    y = QuantLinear(quantize_linear(_linear(8, 16)), path=path)(x)
    assert y[1].isnan().all() and not y[[0, 2]].isnan().any()


def test_the_reference_is_the_exact_integer_sum():
    lin = quantize_linear(_linear())
    x = torch.randn(7, 40)
    a, s, c = quantize_rows(x)
    exact = torch.tensor([[sum(int(a[i, k]) * int(lin.weight[j, k]) for k in range(40)) for j in range(24)]
                          for i in range(7)], dtype=torch.float64)  # Python integers
    assert torch.equal(int8_product_reference(a, lin.weight), exact)
    shift = c.double() * lin.weight.double().sum(1)  # c sum_k q
    want = ((exact * s.double() + shift) * lin.scale.double() + lin.bias.double()).float()
    torch.testing.assert_close(int8_linear_reference(x, lin, k=0), want, rtol=1e-6, atol=1e-6)
    # off the float product by at most the rounding bound: |a s + c - x| <= s / 2, |q scale - w| <= scale / 2
    w = _linear()
    bound = 0.5 * (s * w.weight.abs().sum(1) + lin.scale * x.abs().sum(1, keepdim=True)) + 40 * s * lin.scale / 4
    err = (int8_linear_reference(x, lin, k=0) - F.linear(x, w.weight, w.bias)).abs()
    assert (err <= bound * (1 + 1e-5)).all()


def test_the_outlier_channels_are_multiplied_in_float():
    lin = quantize_linear(_linear(24, 64))
    x = torch.randn(6, 64)
    x[2, 5], x[4, 40], x[0, 63] = 50.0, -80.0, 30.0  # three channels far larger than the rest
    assert outliers(64) == 8 and outliers(16) == 2 and outliers(4096) == 8
    idx = outlier_channels(x, 3)
    assert idx.tolist() == [40, 5, 63] and outlier_channels(x[:0], 3).numel() == 0  # largest first; no rows: none
    a, s, c = quantize_rows(x, ACT_MAX, idx)
    w = dequantize(lin.weight, lin.scale).double()
    want = (int8_product_reference(a, lin.weight) * s.double() * lin.scale.double()
            + (x[:, idx].double() - c.double()) @ w[:, idx].T + c.double() * w.sum(1) + lin.bias.double()).float()
    torch.testing.assert_close(int8_linear_reference(x, lin, k=3), want, rtol=1e-6, atol=1e-6)
    exact = F.linear(x.double(), w, lin.bias.double()).float()  # the float product of the int8 weights
    err_out = (int8_linear_reference(x, lin, k=3) - exact).abs().max()
    err_in = (int8_linear_reference(x, lin, k=0) - exact).abs().max()
    assert err_out < err_in / 5, (err_out, err_in)  # the outliers no longer set the rows' scales


@needs_fbgemm
def test_fbgemm_gives_the_exact_integer_sums_at_the_extremes():
    g = torch.Generator().manual_seed(1)
    q = torch.randint(-127, 128, (48, 2048), generator=g, dtype=torch.int8)
    q[:8] = 127
    q[8:16] = -127
    a = torch.randint(-ACT_MAX, ACT_MAX + 1, (9, 2048), generator=g).float()
    a[0], a[1] = ACT_MAX, -ACT_MAX
    got = _fbgemm_sums(a, _pack(q, torch.ones(48)))
    assert torch.equal(got.double(), int8_product_reference(a, q))  # |sums| up to 63 * 127 * 2048 < 2^24


@pytest.mark.parametrize("path", ["reference", pytest.param("fbgemm", marks=needs_fbgemm)])
@pytest.mark.parametrize("activation", ["none", "gelu", "relu"])
def test_the_int8_linear_gives_the_reference(path, activation):
    lin = quantize_linear(_linear(32, 64))
    layer = QuantLinear(lin, activation, path=path)
    assert layer.act_max == ACT_MAX and f"int8 via {path}" in repr(layer)
    x = torch.randn(2, 5, 64)  # (..., in)
    want = int8_linear_reference(x.reshape(10, 64), lin)
    want = {"none": want, "gelu": F.gelu(want), "relu": F.relu(want)}[activation]
    torch.testing.assert_close(layer(x), want.view(2, 5, 32), rtol=1e-6, atol=1e-6)
    other = torch.randn(10, 32)
    if activation == "none":
        torch.testing.assert_close(layer.add(x.reshape(10, 64), other), want + other, rtol=1e-6, atol=1e-6)


def test_a_float_spec_linear_and_an_unknown_path_are_refused():
    with pytest.raises(ValueError, match="int8 spec Linear"):
        QuantLinear(_linear())
    with pytest.raises(ValueError, match="`path` must be one of native, fbgemm, reference or None, got 'vnni'"):
        QuantLinear(quantize_linear(_linear()), path="vnni")


def test_stacked_rows_keep_their_scales():
    a, b = quantize_linear(_linear(8, 16, 0)), quantize_linear(_linear(4, 16, 1))
    both = cat_rows([a, b])
    assert both.weight.shape == (12, 16) and torch.equal(both.scale, torch.cat([a.scale, b.scale]))
    x = torch.randn(3, 16)
    torch.testing.assert_close(int8_linear_reference(x, both),
                               torch.cat([int8_linear_reference(x, a), int8_linear_reference(x, b)], 1))
    assert torch.equal(both.rows(8, 12).scale, b.scale)


def test_a_spec_in_int8_keeps_the_rest_float():
    from attnkit.inference import spec_of

    spec = quantize_spec(spec_of(_bert()))
    layer = spec.encoder.layers[0]
    assert all(m.weight.dtype == torch.int8 for m in (layer.qkv, layer.self_out, layer.ff1))
    assert layer.ff2.weight.dtype == torch.float32 and layer.ff2.scale is None  # FLOAT_LINEARS
    assert spec.source_embedding.dtype == torch.float32 and spec.pooler.weight.dtype == torch.float32
    assert layer.self_norm.weight.dtype == torch.float32
    every = quantize_spec(spec_of(_bert()), keep=())
    assert every.encoder.layers[1].ff2.weight.dtype == torch.int8
    with pytest.raises(ValueError, match=r"`keep` names \['ff3'\], not linear layers"):
        quantize_spec(spec_of(_bert()), keep=("ff3",))
    translation = spec_of(seq2seq_model(True))  # the output layer: in FLOAT_LINEARS, int8 where not kept
    assert quantize_spec(translation).output.weight.dtype == torch.float32
    assert quantize_spec(translation, keep=("ff2",)).output.weight.dtype == torch.int8


def test_a_bert_model_in_int8_keeps_its_embeddings():
    torch.manual_seed(0)
    model = _bert()
    fast, int8 = engine_for(model), engine_for(model, dtype=torch.int8)
    assert isinstance(int8, BertEngine) and isinstance(int8.encoder.layers[0], QuantLayer)
    assert next(model.parameters()).dtype == torch.float32  # the model is not changed
    ids, lengths = torch.randint(1, 40, (4, 10)), torch.tensor([10, 7, 3, 1])
    with torch.no_grad():
        a, b = fast(ids, lengths=lengths), int8(ids, lengths=lengths)
    keep = torch.arange(10)[None] < lengths[:, None]
    cos = F.cosine_similarity(a.last_hidden_state[keep], b.last_hidden_state[keep], dim=-1)
    assert cos.min() >= 0.99, cos.min()
    assert not torch.equal(a.last_hidden_state, b.last_hidden_state)  # int8 did run


def test_a_seq2seq_model_in_int8_decodes_close_to_float32():
    model = seq2seq_model(True)
    fast, int8 = engine_for(model), engine_for(model, dtype=torch.int8)
    assert isinstance(int8, Seq2SeqEngine) and isinstance(int8.layers[0], QuantLayer)
    assert isinstance(int8.cross_kv, QuantLinear)
    ids, mask = source()
    with torch.no_grad():
        a, b = fast.encode(ids, mask), int8.encode(ids, mask)
        cos = F.cosine_similarity(a, b, dim=-1)[mask.bool()]
        assert cos.min() >= 0.99, cos.min()
        la, lb = fast.decode_step(ids[:, :3], a, mask).logits, int8.decode_step(ids[:, :3], b, mask).logits
    assert F.cosine_similarity(la, lb, dim=-1).min() >= 0.99


def test_a_model_no_engine_runs_stays_float32_and_says_so(caplog):
    m = seq2seq_model(False, positional="rope")  # positions inside attention: no engine
    with caplog.at_level("WARNING", logger="attnkit"):
        assert engine_for(m, dtype=torch.int8) is m
    assert "runs in float32 on its reference modules, not int8: positions inside attention" in caplog.text
    assert next(m.parameters()).dtype == torch.float32
