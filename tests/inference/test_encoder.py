"""The encoder engine (EncoderStack, BertEngine) against the reference modules: a BERT model's outputs and pooler,
pre- and post-LN layers with and without padding, float32 and bfloat16; the native layer against the packed
layer program where it runs, and where it must not."""

import copy

import pytest
import torch

from attnkit.functional.masks import padding, segments
from attnkit.functional.norm import add_norm_kernel_runs
from attnkit.inference import LAYER_ROWS, BertEngine, EncoderStack, engine_for, onednn_available
from attnkit.inference.architectures import ENCODER_LAYER
from attnkit.inference.spec import Layer, Linear, Norm, Settings, Stack
from attnkit.models.bert import BertConfig, BertModel
from attnkit.nn import TransformerConfig
from attnkit.nn.blocks import EncoderLayer

pytestmark = [pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops"),
              pytest.mark.usefixtures("cpu_variant")]


def _bert():
    return BertModel(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=32, max_position_embeddings=12)).eval()


def stack_of(layer: EncoderLayer, config: TransformerConfig) -> EncoderStack:
    """One nn EncoderLayer as an EncoderStack, through the encoder layer's spec table."""
    named = {k: v.detach() for k, v in layer.named_parameters()}
    fields = {f: (Linear(named[f"{m}.weight"], named.get(f"{m}.bias")) if f not in ("self_norm", "ff_norm")
                  else Norm(named[f"{m}.weight"], named.get(f"{m}.bias"), config.layer_norm_eps))
              for f, m in ENCODER_LAYER.items()}
    settings = Settings("bert", config.d_model, config.num_heads, config.norm_first, config.activation)
    return EncoderStack(Stack((Layer(**fields),)), settings)


def test_the_bert_engine_keeps_outputs():
    model = _bert()
    fast = engine_for(model)
    assert isinstance(fast, BertEngine) and fast.encoder.layers[0].ff1.activation == "gelu"
    ids, lengths = torch.randint(1, 40, (3, 9)), torch.tensor([9, 5, 2])
    with torch.no_grad():
        a, b = model(ids, lengths=lengths), fast(ids, lengths=lengths)
    torch.testing.assert_close(b.last_hidden_state, a.last_hidden_state, atol=1e-5, rtol=0)
    torch.testing.assert_close(b.pooler_output, a.pooler_output, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 6e-2)])
def test_the_bert_engine_keeps_outputs_in_each_dtype(dtype, tol):
    model = _bert()
    fast = engine_for(model, dtype=dtype)
    assert next(model.parameters()).dtype == torch.float32  # the model itself is not changed
    linears = [m for layer in fast.encoder.layers for m in (layer.self_out, layer.ff2)]
    assert all(m._native_norm == add_norm_kernel_runs(dtype, 16) for m in linears)
    ids, lengths = torch.randint(1, 40, (3, 9)), torch.tensor([9, 5, 1])
    for native in (True, False):  # LN(h + f(h)): the native kernel, or the residual as a post-op and a LayerNorm
        for m in linears:
            m._native_norm = native and add_norm_kernel_runs(dtype, 16)
        for grad in (False, True):  # autograd on: SDPA; inference: grouped math in bfloat16
            with torch.set_grad_enabled(grad):
                a, b = model(ids, lengths=lengths), fast(ids, lengths=lengths)
            torch.testing.assert_close(b.last_hidden_state.float(), a.last_hidden_state, atol=tol, rtol=tol)
    with pytest.raises(ValueError, match="weights"):
        fast(ids, lengths=lengths, need_weights=True)


def test_a_bert_engine_checks_its_inputs_as_the_model_does():
    fast = engine_for(_bert())
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 12"):
        fast(torch.randint(1, 40, (1, 13)))
    with pytest.raises(ValueError, match="`position_ids` must lie in"):
        fast(torch.randint(1, 40, (1, 3)), position_ids=torch.tensor([[0, 1, 12]]))
    with pytest.raises(ValueError, match="pass `lengths` or `mask`"):
        fast(torch.randint(1, 40, (1, 3)), lengths=torch.tensor([3]), mask=padding(torch.tensor([3])))


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu"), (True, "relu")])
def test_the_stack_keeps_pre_and_post_ln_outputs(norm_first, activation):
    torch.manual_seed(0)
    config = TransformerConfig(d_model=16, num_heads=4, d_ff=32, norm_first=norm_first, activation=activation)
    layer = EncoderLayer(config).eval()
    fused = stack_of(layer, config)
    assert fused.layers[0].norm_first == norm_first
    x, mask = torch.randn(2, 7, 16), padding(torch.tensor([7, 3]))
    with torch.no_grad():
        for m in (None, mask):
            torch.testing.assert_close(fused.run(x, m), layer(x, m)[0], atol=1e-5, rtol=1e-5)


def _counting(stack: EncoderStack) -> list:
    """Count the calls of the stack's native layer kernel (layer_forward)."""
    calls, kernel = [], stack.layer_kernel

    def counted(*args):
        calls.append(args[0].shape)
        return kernel(*args)

    stack.layer_kernel = counted
    return calls


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 5e-2)])
@pytest.mark.parametrize("norm_first,activation", [(False, "gelu"), (True, "relu"), (True, "silu")])
def test_the_native_layer_gives_the_packed_program(dtype, tol, norm_first, activation):
    """At up to LAYER_ROWS positions under padding (or none) the layer is one native call: the same outputs as
    the packed layer program (its reference), padded rows included."""
    torch.manual_seed(2)
    config = TransformerConfig(d_model=64, num_heads=2, d_ff=64, norm_first=norm_first, activation=activation)
    fused = stack_of(EncoderLayer(config).eval().to(dtype), config)
    if fused.layer_kernel is None:
        pytest.skip("the native layer does not run here")
    reference = copy.copy(fused)
    reference.layer_kernel = None  # the packed program
    calls = _counting(fused)
    x = torch.randn(2, 7, 64, dtype=dtype)
    with torch.no_grad():
        for mask in (None, padding(torch.tensor([7, 3]))):
            torch.testing.assert_close(fused.run(x, mask).float(), reference.run(x, mask).float(), atol=tol, rtol=tol)
    assert len(calls) == 2


def test_the_native_layer_is_not_used_where_its_conditions_fail():
    config = TransformerConfig(d_model=32, num_heads=2, d_ff=64)
    fused = stack_of(EncoderLayer(config).eval(), config)
    if fused.layer_kernel is None:
        pytest.skip("the native layer does not run here")
    calls = _counting(fused)
    x = torch.randn(1, LAYER_ROWS, 32)
    with torch.no_grad():
        fused.run(x)  # LAYER_ROWS rows: native
        fused.run(torch.randn(1, LAYER_ROWS + 1, 32))  # one row more
        fused.run(x, backend="math")  # a backend named: it runs
        fused.run(x, segments([LAYER_ROWS - 6, 6]))  # packed sequences: the short kernel's offsets, not lengths
    fused.run(x)  # autograd on
    assert calls == [x.shape]
