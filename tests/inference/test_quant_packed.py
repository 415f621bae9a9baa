"""attnkit's own int8 kernel (``int8_linear``, W packed by ``Int8Packed``) against the exact reference
(``quant.int8_linear_reference``) in every variant this CPU runs: odd sizes (K not a multiple of 4 or 64, N = 1, no
rows), both layouts (blocked up to 4 rows, panels beyond, several chunks of rows), the extremes of the integer
sums (bit for bit), every call of the layer program, NaN rows; and the native compositions (a decoding step, an
encoder layer) with int8 layers against the packed layer program."""

import copy

import pytest
import torch
import torch.nn.functional as F

from attnkit.functional import native
from attnkit.functional.masks import padding
from attnkit.inference import EncoderStack, Seq2SeqEngine, engine_for
from attnkit.inference.architectures import ENCODER_LAYER
from attnkit.inference.quant import NATIVE_ACT_MAX, int8_linear_reference, quantize_linear
from attnkit.inference.quant_linear import QuantLinear, float_linears, int8_path
from attnkit.inference.quant_packed import BLOCKED_ROWS, Int8Packed
from attnkit.inference.spec import Layer, Linear, Norm, Settings, Stack
from attnkit.nn import TransformerConfig
from attnkit.nn.blocks import EncoderLayer
from tests.inference.test_encoder import stack_of
from tests.inference.test_seq2seq import model as seq2seq_model
from tests.inference.test_seq2seq import source

pytestmark = pytest.mark.usefixtures("cpu_variant")


@pytest.fixture(autouse=True)
def _native(cpu_variant):
    if native.kernel() is None:
        pytest.skip(f"native kernel unavailable here: {native.unavailable()}")


def _linear(n, k, seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    return quantize_linear(Linear(torch.randn(n, k, generator=g), torch.randn(n, generator=g) if bias else None))


ACTS = {"none": lambda y: y, "relu": F.relu, "silu": F.silu, "gelu": F.gelu,
        "gelu_tanh": lambda y: F.gelu(y, approximate="tanh")}


@pytest.mark.parametrize("rows,k,n", [(1, 100, 20), (2, 17, 1), (3, 64, 48), (4, 1, 16), (5, 130, 33), (13, 384, 96),
                                      (64, 40, 20), (65, 72, 48), (150, 31, 17), (0, 64, 16)])
def test_the_native_kernel_gives_the_reference(rows, k, n, one_thread):
    lin = _linear(n, k, seed=rows + k)
    layer = QuantLinear(lin, path="native")
    assert layer.act_max == NATIVE_ACT_MAX and "int8 via native" in repr(layer)
    x = 3 * torch.randn(rows, k)
    x[:, k // 2] += 20  # one channel far larger: an outlier where the layer keeps any
    got = layer.rows(x)
    assert got.shape == (rows, n) and got.dtype == torch.float32
    want = int8_linear_reference(x, lin, NATIVE_ACT_MAX)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()) if rows else 0)


@pytest.mark.parametrize("rows", [1, 5, 70])
def test_outliers_crowded_into_one_block_and_the_last_partial_one(rows, one_thread):
    """All 8 outlier channels in two blocks of 16 (6 in the last, partial one, K = 70), a NaN in one of them: the
    rows' ranges leave them out, their integers are 0, they come back in float32, and the NaN row alone is NaN."""
    k = 70
    lin = _linear(24, k, seed=rows)
    layer = QuantLinear(lin, "gelu", path="native")
    x = torch.randn(rows, k)
    x[:, 64:70] += 30
    x[:, 20:22] -= 25
    x[-1, 66] = float("nan")
    want = F.gelu(int8_linear_reference(x, lin, NATIVE_ACT_MAX))
    got = layer.rows(x)
    assert got[-1].isnan().all() and not got[:-1].isnan().any()
    torch.testing.assert_close(got[:-1], want[:-1], rtol=1e-5, atol=1e-5 * float(want[:-1].abs().max()) if rows > 1
                               else 0)


@pytest.mark.parametrize("rows", [1, BLOCKED_ROWS, BLOCKED_ROWS + 1, 70])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_integer_sums_are_exact_at_the_extremes(rows, threads):
    """Rows of integers reaching +-127 (c = 0, s = 1), weights of +-127 with scale 1, the 8 outlier channels
    integers too: every output is the exact integer sum (|sum| < 2^24, so exact in float32 too)."""
    torch.set_num_threads(threads)
    k, n = 1000, 40  # 127^2 * 1000 < 2^24
    g = torch.Generator().manual_seed(rows)
    q = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    q[:8], q[8:16] = 127, -127
    x = torch.randint(-127, 128, (rows, k), generator=g).float()
    x[:, 0], x[:, 1] = 127, -127  # each row's range: [-127, 127]
    x[0, 10:] = 127 * torch.sign(torch.randn(k - 10, generator=g))  # products at the limit, pairs of 2 * 127^2
    x[-1, 2:10] = 150  # the outlier channels (the largest |x|), out of the rows' ranges
    layer = QuantLinear(Linear(q, None, torch.ones(n)), path="native")
    want = F.linear(x.double(), q.double())
    assert torch.equal(layer.rows(x).double(), want), (layer.rows(x).double() - want).abs().max()


@pytest.mark.parametrize("activation", list(ACTS))
def test_every_call_of_the_layer_program(activation):
    lin = _linear(48, 64, seed=3)
    fast, slow = (QuantLinear(lin, activation, path=p, act_max=NATIVE_ACT_MAX) for p in ("native", "reference"))
    norm = Norm(torch.randn(64), torch.randn(64), 1e-5)
    out_norm = Norm(torch.randn(48), torch.randn(48), 1e-5)
    for rows in (1, 3, 9):
        x, other = torch.randn(rows, 64), torch.randn(rows, 48)
        tol = dict(rtol=2e-5, atol=2e-5)
        want = int8_linear_reference(x, lin, NATIVE_ACT_MAX)
        torch.testing.assert_close(fast.rows(x), ACTS[activation](want), **tol)
        torch.testing.assert_close(fast.rows(x), slow.rows(x), **tol)
        torch.testing.assert_close(fast.norm_rows(x, norm), slow.norm_rows(x, norm), **tol)  # LN inside the kernel
        if activation == "none":
            torch.testing.assert_close(fast.add(x, other), want + other, **tol)
            torch.testing.assert_close(fast.add_norm(x, other, out_norm), out_norm(want + other), **tol)


def test_a_nan_row_stays_nan_and_the_others_keep_their_values():
    layer = QuantLinear(_linear(32, 64), path="native")
    for rows in (3, 9):  # blocked, panels
        x = torch.randn(rows, 64)
        clean = layer.rows(x)
        x[1, 4] = float("nan")
        y = layer.rows(x)
        assert y[1].isnan().all()
        others = torch.arange(rows) != 1
        assert not y[others].isnan().any()
        torch.testing.assert_close(y[others], int8_linear_reference(x, layer_spec(layer), NATIVE_ACT_MAX)[others])
        assert clean.isfinite().all()


def layer_spec(layer: QuantLinear) -> Linear:
    return Linear(layer.weight, layer.bias, layer.scale)


def test_the_weights_are_packed_once_in_both_layouts():
    lin = _linear(20, 100)
    packed = Int8Packed(lin)
    assert packed.blocked_w.shape == (8, 2, 4, 64) and packed.panels_w.shape == (2, 32, 16, 4)  # N' 32, kp 128
    w = F.pad(lin.weight, (0, 28, 0, 12))
    assert packed.blocked_w[1, 1, 2, 5] == w[4 + 2, 64 + 5] and packed.panels_w[1, 3, 7, 2] == w[16 + 7, 12 + 2]
    assert packed.weight(BLOCKED_ROWS) is packed.blocked and packed.weight(BLOCKED_ROWS + 1) is packed.panels
    assert packed.fields(True)["w"] is packed.panels_w and packed.bias.shape == (32,)
    assert torch.equal(packed.fields(False)["wsum"][:20], 128 * lin.weight.sum(1, dtype=torch.int32))
    assert int8_path() == "native"


def test_the_engines_take_every_linear_layer_in_int8_on_the_native_path():
    m = seq2seq_model(False)  # (d 32: its wider test model's logits move by 0.05 of cosine with any int8 layer)
    engine = engine_for(m, dtype=torch.int8)
    assert float_linears() == ()
    assert all(isinstance(lin, QuantLinear) for layer in engine.layers for lin in layer.linears())
    assert isinstance(engine.output, QuantLinear) and engine.output.path == "native"
    ids, mask = source()
    with torch.no_grad():
        memory = engine.encode(ids, mask)
        want = engine_for(m).decode_step(ids[:, :2], m.encode(ids, mask), mask).logits
        got = engine.decode_step(ids[:, :2], memory, mask).logits
    assert F.cosine_similarity(got, want, dim=-1).min() > 0.99


@pytest.mark.parametrize("norm_first,activation", [(False, "silu"), (True, "gelu")])
@pytest.mark.parametrize("copies", [1, 2])
def test_an_int8_decoding_step_in_one_native_call_gives_the_layer_program(norm_first, activation, copies,
                                                                         one_thread):
    """3 rows (W blocked) or 6 (in panels) a step."""
    m = seq2seq_model(norm_first, activation, d_model=64)
    fast = engine_for(m, dtype=torch.int8)
    assert isinstance(fast, Seq2SeqEngine)
    if fast.native_step is None:
        pytest.skip("the native decoding step does not run here")
    slow = copy.copy(fast)
    slow.native_step = None  # the packed layer program, each int8 layer its own native call
    ids, mask = (t.repeat(copies, 1) for t in source())
    memory = fast.encode(ids, mask)
    tok, cache_a, cache_b = torch.randint(3, 30, (3 * copies, 1)), None, None
    for _ in range(6):
        a, b = fast.decode_step(tok, memory, mask, cache_a), slow.decode_step(tok, memory, mask, cache_b)
        cache_a, cache_b = a.cache, b.cache
        torch.testing.assert_close(a.logits, b.logits, rtol=2e-5, atol=2e-5)
        tok = a.logits.argmax(-1, keepdim=True)


def int8_stack(layer: EncoderLayer, config: TransformerConfig) -> EncoderStack:
    """One nn EncoderLayer as an EncoderStack with every linear layer in int8 (``stack_of``'s, quantised)."""
    named = {k: v.detach() for k, v in layer.named_parameters()}
    fields = {f: (quantize_linear(Linear(named[f"{m}.weight"], named.get(f"{m}.bias")))
                  if f not in ("self_norm", "ff_norm") else Norm(named[f"{m}.weight"], named.get(f"{m}.bias"), 1e-5))
              for f, m in ENCODER_LAYER.items()}
    settings = Settings("bert", config.d_model, config.num_heads, config.norm_first, config.activation)
    return EncoderStack(Stack((Layer(**fields),)), settings)


@pytest.mark.parametrize("norm_first,activation", [(False, "gelu"), (True, "relu")])
def test_an_int8_encoder_layer_in_one_native_call_gives_the_layer_program(norm_first, activation):
    torch.manual_seed(4)
    config = TransformerConfig(d_model=64, num_heads=2, d_ff=96, norm_first=norm_first, activation=activation)
    layer = EncoderLayer(config).eval()
    int8 = int8_stack(layer, config)
    if int8.layer_kernel is None:
        pytest.skip("the native layer does not run here")
    program = copy.copy(int8)
    program.layer_kernel = None  # the packed layer program, each int8 layer its own native call
    x = torch.randn(2, 7, 64)
    with torch.no_grad():
        for mask in (None, padding(torch.tensor([7, 3]))):
            torch.testing.assert_close(int8.run(x, mask), program.run(x, mask), rtol=2e-5, atol=2e-5)
        cos = F.cosine_similarity(int8.run(x), stack_of(layer, config).run(x), dim=-1)
    assert cos.min() > 0.99
