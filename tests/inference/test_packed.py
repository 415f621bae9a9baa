"""PackedLinear (oneDNN pre-packed weights, and the native small kernel for a few rows) against F.linear: every
activation, row count and layout, the residual sum and LayerNorm inside the kernel, NaN rows."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnkit.functional import native as native_ext
from attnkit.inference import LAYER_ROWS, PANEL_ROWS, SMALL_ROWS, PackedLinear, onednn_available
from attnkit.inference.packed import PANEL_INPUTS
from attnkit.inference.spec import Norm

pytestmark = [pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops"),
              pytest.mark.usefixtures("cpu_variant")]


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
        # blocked up to SMALL_ROWS, panels up to PANEL_ROWS, then oneDNN
        for rows in (1, 2, 3, SMALL_ROWS, SMALL_ROWS + 3, LAYER_ROWS, LAYER_ROWS + 1, PANEL_ROWS, PANEL_ROWS + 1):
            x = 3 * torch.randn(rows, 64, dtype=dtype)
            ref = fn(nn.functional.linear(x.double(), lin.weight.double(), lin.bias.double()))
            torch.testing.assert_close(packed(x).double(), ref, atol=tol, rtol=tol)
            if activation == "none":
                other = torch.randn(rows, 48, dtype=dtype)
                assert (packed._blocked is not None) == (packed.small is not None)  # made on the first call
                torch.testing.assert_close(packed.add(x, other).double(), ref + other.double(), atol=tol, rtol=tol)
        panels = packed.small is not None and (dtype == torch.float32 or native_ext.kernel().cpu_has_bf16())
        assert (packed._panels is not None) == panels  # bfloat16 panels: AVX512-BF16 only


def test_the_panels_take_up_to_panel_rows_of_narrow_inputs_and_layer_rows_of_wide_ones():
    narrow, wide = PackedLinear(nn.Linear(PANEL_INPUTS, 32)), PackedLinear(nn.Linear(PANEL_INPUTS + 16, 32))
    if narrow.small is None:
        pytest.skip("the native kernel does not run here")
    assert narrow.small_weight(PANEL_ROWS) is not None and narrow.small_weight(PANEL_ROWS + 1) is None
    assert wide.small_weight(LAYER_ROWS) is not None and wide.small_weight(LAYER_ROWS + 1) is None


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, PANEL_ROWS + 2), k=st.sampled_from([16, 48, 96]), n=st.sampled_from([16, 40, 80]),
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
@pytest.mark.parametrize("rows", [1, 3, SMALL_ROWS + 1, LAYER_ROWS + 1, PANEL_ROWS + 1])
def test_add_norm_is_the_layer_norm_of_the_residual_sum(dtype, tol, rows, one_thread):
    torch.manual_seed(1)
    lin, norm = nn.Linear(64, 32).to(dtype), nn.LayerNorm(32).to(dtype)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
        x, other = torch.randn(rows, 64, dtype=dtype), 3 * torch.randn(rows, 32, dtype=dtype)
        s = nn.functional.linear(x.double(), lin.weight.double(), lin.bias.double()) + other.double()
        ref = nn.functional.layer_norm(s, (32,), norm.weight.double(), norm.bias.double(), 1e-5)
        got = PackedLinear(lin).add_norm(x, other, Norm(norm.weight, norm.bias, 1e-5))
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


def test_residual_add_post_op():
    lin = nn.Linear(8, 6)
    x, other = torch.randn(5, 8), torch.randn(5, 6)
    with torch.no_grad():
        torch.testing.assert_close(PackedLinear(lin).add(x, other), lin(x) + other, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="activation"):
        PackedLinear(lin, "gelu").add(x, other)


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
@pytest.mark.parametrize("rows", [1, 13, LAYER_ROWS + 5, PANEL_ROWS + 5])
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
        got = PackedLinear(lin, activation).norm_rows(x, Norm(norm.weight, norm.bias, 1e-5))
    assert got.shape == (rows, 40) and got.dtype == dtype
    torch.testing.assert_close(got.double(), ref, atol=tol, rtol=tol)
