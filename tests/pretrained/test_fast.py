import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnkit.functional import native as native_ext
from attnkit.functional.masks import padding, segments
from attnkit.functional.norm import add_norm_kernel_runs
from attnkit.models.bert import BertConfig, BertModel
from attnkit.nn import TransformerConfig
from attnkit.nn.blocks import EncoderLayer
from attnkit.pretrained.fast import (
    LAYER_ROWS,
    SMALL_ROWS,
    FusedEncoderLayer,
    PackedLinear,
    fuse_encoder_layers,
    onednn_available,
    pack_linears,
)

pytestmark = pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops")


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_packed_linear_matches_linear(dtype, tol):
    lin = nn.Linear(16, 24).to(dtype)
    x = torch.randn(2, 5, 16, dtype=dtype)
    with torch.no_grad():
        torch.testing.assert_close(PackedLinear(lin)(x), lin(x), atol=tol, rtol=tol)
        torch.testing.assert_close(PackedLinear(lin, "gelu")(x), nn.functional.gelu(lin(x)), atol=tol, rtol=tol)
        for act, fn in (("relu", torch.relu), ("silu", nn.functional.silu),
                        ("gelu_tanh", lambda y: nn.functional.gelu(y, approximate="tanh"))):
            torch.testing.assert_close(PackedLinear(lin, act)(x), fn(lin(x)), atol=tol, rtol=tol)
    assert PackedLinear(lin).weight is not None
    with pytest.raises(ValueError, match="activation"):
        PackedLinear(lin, "tanh")


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("activation", ["none", "relu", "silu", "gelu", "gelu_tanh"])
def test_a_few_rows_take_the_small_kernel_with_the_same_results(dtype, tol, activation, one_thread):
    torch.manual_seed(0)
    lin = nn.Linear(64, 48).to(dtype)
    packed = PackedLinear(lin, activation)
    assert (packed.small is not None) == (native_ext.kernel() is not None)
    fn = {"none": lambda y: y, "relu": torch.relu, "silu": nn.functional.silu, "gelu": nn.functional.gelu,
          "gelu_tanh": lambda y: nn.functional.gelu(y, approximate="tanh")}[activation]
    with torch.no_grad():
        # blocked up to SMALL_ROWS, panels up to LAYER_ROWS, then oneDNN
        for rows in (1, 2, 3, SMALL_ROWS, SMALL_ROWS + 3, LAYER_ROWS, LAYER_ROWS + 1):
            x = 3 * torch.randn(rows, 64, dtype=dtype)
            ref = fn(nn.functional.linear(x.double(), lin.weight.double(), lin.bias.double()))
            torch.testing.assert_close(packed(x).double(), ref, atol=tol, rtol=tol)
            if activation == "none":
                other = torch.randn(rows, 48, dtype=dtype)
                assert (packed._blocked is not None) == (packed.small is not None)  # made on the first call
                torch.testing.assert_close(packed.add(x, other).double(), ref + other.double(), atol=tol, rtol=tol)
        assert (packed._panels is not None) == (packed.small is not None)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, LAYER_ROWS + 2), k=st.sampled_from([16, 48, 96]), n=st.sampled_from([16, 40, 80]),
       bf16=st.booleans(), act=st.sampled_from(["none", "relu", "gelu"]), nan_row=st.booleans())
def test_every_row_count_gives_the_reference(rows, k, n, bf16, act, nan_row):
    """Blocked, panels and oneDNN against float64 F.linear; a NaN in one row of x stays in that row."""
    torch.manual_seed(rows * 7 + k + n)
    dtype, tol = (torch.bfloat16, 4e-2) if bf16 else (torch.float32, 3e-5)
    lin = nn.Linear(k, n).to(dtype)
    packed = PackedLinear(lin, act)
    fn = {"none": lambda y: y, "relu": torch.relu, "gelu": nn.functional.gelu}[act]
    x = 2 * torch.randn(rows, k, dtype=dtype)
    if nan_row and rows:
        x[rows // 2, k // 3] = float("nan")
    with torch.no_grad():
        got = packed(x).double()
        ref = fn(nn.functional.linear(x.double(), lin.weight.double(), lin.bias.double()))
        assert got.shape == (rows, n)
        torch.testing.assert_close(got, ref, atol=tol, rtol=tol, equal_nan=True)
        if nan_row and rows:
            assert got[rows // 2].isnan().all() and not got[: rows // 2].isnan().any()


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 4e-2)])
@pytest.mark.parametrize("rows", [1, 3, SMALL_ROWS + 1, LAYER_ROWS + 1])
def test_add_norm_is_the_layer_norm_of_the_residual_sum(dtype, tol, rows, one_thread):
    torch.manual_seed(1)
    lin, norm = nn.Linear(64, 32).to(dtype), nn.LayerNorm(32).to(dtype)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
        x, other = torch.randn(rows, 64, dtype=dtype), 3 * torch.randn(rows, 32, dtype=dtype)
        s = nn.functional.linear(x.double(), lin.weight.double(), lin.bias.double()) + other.double()
        ref = nn.functional.layer_norm(s, (32,), norm.weight.double(), norm.bias.double(), 1e-5)
        got = PackedLinear(lin).add_norm(x, other, norm.weight, norm.bias, 1e-5)
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), ref, atol=tol, rtol=tol)


def test_the_small_kernel_pads_outputs_to_16_and_skips_what_it_cannot_run(one_thread):
    lin = nn.Linear(64, 40)  # 40 outputs: padded to 48 in the kernel's copy, the 8 extra columns dropped
    packed = PackedLinear(lin).prepare_small()
    x, other = torch.randn(3, 64), torch.randn(3, 40)
    with torch.no_grad():
        torch.testing.assert_close(packed(x), lin(x), atol=2e-5, rtol=2e-5)
        torch.testing.assert_close(packed.add(x, other), lin(x) + other, atol=2e-5, rtol=2e-5)  # oneDNN's
    if packed.small is not None:
        assert packed._blocked.shape == (12, 4, 4, 16) and packed(x).shape == (3, 40)
    assert PackedLinear(nn.Linear(24, 48)).small is None  # 24 inputs
    lin = nn.Linear(32, 32)
    x = torch.randn(8, 32)[::2]  # 4 rows, strided: oneDNN takes it
    with torch.no_grad():
        torch.testing.assert_close(PackedLinear(lin)(x), lin(x), atol=1e-5, rtol=1e-5)


def test_pack_linears_keeps_outputs():
    model = BertModel(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=32, max_position_embeddings=12)).eval()
    fast = pack_linears(copy.deepcopy(model))
    assert not any(type(m) is nn.Linear for m in fast.modules())
    assert isinstance(fast.encoder.layers[0].ff.linear1, PackedLinear)
    assert fast.encoder.layers[0].ff.linear1.activation == "gelu"
    ids, lengths = torch.randint(1, 40, (3, 9)), torch.tensor([9, 5, 2])
    with torch.no_grad():
        a, b = model(ids, lengths=lengths), fast(ids, lengths=lengths)
    torch.testing.assert_close(b.last_hidden_state, a.last_hidden_state, atol=1e-5, rtol=0)
    torch.testing.assert_close(b.pooler_output, a.pooler_output, atol=1e-5, rtol=0)


def _bert():
    return BertModel(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=32, max_position_embeddings=12)).eval()


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 6e-2)])
def test_fused_encoder_layers_keep_outputs(dtype, tol):
    model = _bert()
    fast = fuse_encoder_layers(copy.deepcopy(model).to(dtype))
    assert all(isinstance(layer, FusedEncoderLayer) for layer in fast.encoder.layers)
    assert not any(type(m) is nn.Linear for m in fast.modules())
    assert all(layer.native_norm == add_norm_kernel_runs(dtype, 16) for layer in fast.encoder.layers)
    ids, lengths = torch.randint(1, 40, (3, 9)), torch.tensor([9, 5, 1])
    for native in (True, False):  # LN(h + f(h)): the native kernel, or the residual as a post-op and a LayerNorm
        for layer in fast.encoder.layers:
            layer.native_norm = native and add_norm_kernel_runs(dtype, 16)
        for grad in (False, True):  # autograd on: SDPA; inference: grouped math in bfloat16
            with torch.set_grad_enabled(grad):
                a, b = model(ids, lengths=lengths), fast(ids, lengths=lengths)
            torch.testing.assert_close(b.last_hidden_state.float(), a.last_hidden_state, atol=tol, rtol=tol)
    with pytest.raises(ValueError, match="weights"):
        fast(ids, lengths=lengths, need_weights=True)


def test_residual_add_post_op():
    lin = nn.Linear(8, 6)
    x, other = torch.randn(5, 8), torch.randn(5, 6)
    with torch.no_grad():
        torch.testing.assert_close(PackedLinear(lin).add(x, other), lin(x) + other, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="activation"):
        PackedLinear(lin, "gelu").add(x, other)


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu"), (True, "relu")])
def test_fused_layer_keeps_pre_and_post_ln_outputs(norm_first, activation):
    torch.manual_seed(0)
    layer = EncoderLayer(TransformerConfig(d_model=16, num_heads=4, d_ff=32, norm_first=norm_first,
                                           activation=activation)).eval()
    fused = FusedEncoderLayer(layer)
    assert fused.norm_first == norm_first
    x, mask = torch.randn(2, 7, 16), padding(torch.tensor([7, 3]))
    with torch.no_grad():
        for m in (None, mask):
            torch.testing.assert_close(fused(x, m)[0], layer(x, m)[0], atol=1e-5, rtol=1e-5)


def test_fused_layer_refuses_positions_inside_attention():
    rope = EncoderLayer(TransformerConfig(d_model=16, num_heads=4, d_ff=32, positional="rope"))
    assert not FusedEncoderLayer.supports(rope)
    with pytest.raises(ValueError, match="positional"):
        FusedEncoderLayer(rope)


def _counting(layer: FusedEncoderLayer) -> list:
    """Count the calls of the layer's native kernel (layer_forward)."""
    calls, kernel = [], layer._native_layer

    def counted(*args):
        calls.append(args[0].shape)
        return kernel(*args)

    layer._native_layer = counted
    return calls


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 5e-2)])
@pytest.mark.parametrize("norm_first,activation", [(False, "gelu"), (True, "relu"), (True, "silu")])
def test_the_native_layer_gives_the_python_sequence(dtype, tol, norm_first, activation):
    """At up to LAYER_ROWS positions under padding (or none) the layer is one native call: the same outputs as
    the Python sequence (its reference), padded rows included."""
    torch.manual_seed(2)
    layer = EncoderLayer(TransformerConfig(d_model=64, num_heads=2, d_ff=64, norm_first=norm_first,
                                           activation=activation)).eval().to(dtype)
    fused = FusedEncoderLayer(layer)
    if fused._native_layer is None:
        pytest.skip("the native layer does not run here")
    reference = copy.copy(fused)
    reference._native_layer = None  # the Python sequence
    calls = _counting(fused)
    x = torch.randn(2, 7, 64, dtype=dtype)
    with torch.no_grad():
        for mask in (None, padding(torch.tensor([7, 3]))):
            torch.testing.assert_close(fused(x, mask)[0].float(), reference(x, mask)[0].float(), atol=tol, rtol=tol)
    assert len(calls) == 2


def test_the_native_layer_is_not_used_where_its_conditions_fail():
    layer = EncoderLayer(TransformerConfig(d_model=32, num_heads=2, d_ff=64)).eval()
    fused = FusedEncoderLayer(layer)
    if fused._native_layer is None:
        pytest.skip("the native layer does not run here")
    calls = _counting(fused)
    x = torch.randn(1, LAYER_ROWS, 32)
    with torch.no_grad():
        fused(x)  # LAYER_ROWS rows: native
        fused(torch.randn(1, LAYER_ROWS + 1, 32))  # one row more
        fused(x, backend="math")  # a backend named: it runs
        fused(x, segments([LAYER_ROWS - 6, 6]))  # packed sequences: the short kernel's offsets, not a layer's lengths
    fused(x)  # autograd on
    assert calls == [x.shape]


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 4e-2)])
@pytest.mark.parametrize("rows", [1, 3, SMALL_ROWS + 3])
def test_the_small_kernel_normalises_its_input(dtype, tol, rows):
    """small_linear with x_norm_weight / x_norm_bias: LN(x) W^T + b (a pre-LN layer's norm in the kernel),
    blocked and in panels."""
    kernel = native_ext.kernel()
    if kernel is None:
        pytest.skip("native kernel unavailable")
    torch.manual_seed(rows)
    lin, norm = nn.Linear(64, 48).to(dtype), nn.LayerNorm(64).to(dtype)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
        x = 5 + 3 * torch.randn(rows, 64, dtype=dtype)  # an offset the norm removes
        h = nn.functional.layer_norm(x.double(), (64,), norm.weight.double(), norm.bias.double(), 1e-5)
        ref = nn.functional.linear(h, lin.weight.double(), lin.bias.double())
        packed = PackedLinear(lin)
        got = kernel.small_linear(x, packed.small_weight(rows), lin.bias, None, 0, None, None, 1e-5, norm.weight,
                                  norm.bias)
        torch.testing.assert_close(got.double(), ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 4e-2)])
@pytest.mark.parametrize("rows", [1, 13, LAYER_ROWS + 5])
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_norm_rows_is_the_layer_norm_then_the_layer(dtype, tol, rows, activation):
    """PackedLinear.norm_rows: act(LN(x) W^T + b), the norm inside the native call at a few rows (the
    decoder's last norm and the output layer of a NAT pass), torch.layer_norm then the layer above."""
    torch.manual_seed(rows)
    lin, norm = nn.Linear(64, 40).to(dtype), nn.LayerNorm(64).to(dtype)  # 40 outputs: padded to 48 inside
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
        x = 2 + 3 * torch.randn(rows, 64, dtype=dtype)
        h = nn.functional.layer_norm(x.double(), (64,), norm.weight.double(), norm.bias.double(), 1e-5)
        ref = nn.functional.linear(h, lin.weight.double(), lin.bias.double())
        ref = ref.relu() if activation == "relu" else ref
        got = PackedLinear(lin, activation).norm_rows(x, norm.weight, norm.bias, 1e-5)
    assert got.shape == (rows, 40) and got.dtype == dtype
    torch.testing.assert_close(got.double(), ref, atol=tol, rtol=tol)
