import copy

import pytest
import torch
from torch import nn

from attnkit.models.bert import BertConfig, BertModel
from attnkit.pretrained.fast import PackedLinear, onednn_available, pack_linears

pytestmark = pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN linear ops")


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_packed_linear_matches_linear(dtype, tol):
    lin = nn.Linear(16, 24).to(dtype)
    x = torch.randn(2, 5, 16, dtype=dtype)
    with torch.no_grad():
        torch.testing.assert_close(PackedLinear(lin)(x), lin(x), atol=tol, rtol=tol)
        torch.testing.assert_close(PackedLinear(lin, "gelu")(x), nn.functional.gelu(lin(x)), atol=tol, rtol=tol)
    assert PackedLinear(lin).weight is not None
    with pytest.raises(ValueError, match="activation"):
        PackedLinear(lin, "relu")


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
