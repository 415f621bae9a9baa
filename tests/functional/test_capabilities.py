"""The public capability query: what each backend takes here, and why a call would be refused."""

from __future__ import annotations

import torch

import attnkit
from attnkit import masks as M
from attnkit.functional import capabilities, dispatch, native, why_not
from attnkit.functional.backends import short


def test_every_backend_is_described():
    caps = capabilities()
    assert sorted(caps) == attnkit.available_backends()
    assert caps["math"].weights and caps["math"].grad and caps["math"].dtypes is None
    assert caps["linear_approx"].exact is False and caps["linear_approx"].automatic is False
    assert {n for n, c in caps.items() if c.automatic} == {r.backend for r in dispatch.RULES}
    for name in ("short", "tiled"):
        c = caps[name]
        assert not c.grad and not c.dropout and not c.bias and c.devices == ("cpu",)
        assert (c.available is None) == (native.kernel() is not None)
        assert c.dtypes == (() if c.available else get_dtypes(name))


def get_dtypes(name):
    return short.kernel_dtypes() if name == "short" else (torch.float32, torch.bfloat16)


def test_why_not_says_what_attention_would_raise():
    q = torch.randn(2, 3, 10, 16, requires_grad=True)
    assert why_not("math", q, q, q) is None
    assert why_not("sdpa", q, q, q, return_weights=True).startswith("backend 'sdpa' cannot return weights")
    assert why_not("local", q, q, q, M.causal()).startswith("backend 'local' needs a window mask")
    assert "one device" in why_not("math", q, q.detach().to("meta"), q)
    if native.kernel() is not None:
        assert why_not("short", q, q, q) == ("backend 'short' has no backward (inference only); call it under "
                                             "torch.no_grad() or use another backend")
        with torch.no_grad():
            assert why_not("short", q, q, q, M.padding([10, 4])) is None
            assert why_not("short", q, q, q, M.causal()).startswith("backend 'short' takes no mask, a padding")
