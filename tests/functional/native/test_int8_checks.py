"""The int8 kernel's native entry points (``Int8Weight``, ``int8_linear``) check every argument themselves: a direct
call with bad tensors is a RuntimeError, never a crash (in a subprocess, as ``test_entry_checks``)."""

from __future__ import annotations

import textwrap

import pytest

from attnkit.functional import native
from tests.functional.native.test_entry_checks import REFUSE_ALL, run_refusals

pytestmark = pytest.mark.usefixtures("cpu_variant")

SCRIPT = REFUSE_ALL + textwrap.dedent('''
    import torch
    from attnkit.functional import native

    K = native.kernel()
    i8, f32 = torch.int8, torch.float32

    def parts(n=20, k=100, panels=False, **change):
        """Int8Weight's arguments for W (n, k): N' = n up to 16, kp = k up to 64."""
        np_, kp = -(-n // 16) * 16, -(-k // 64) * 64
        w = torch.zeros(np_ // 16, kp // 4, 16, 4, dtype=i8) if panels else torch.zeros(np_ // 4, kp // 64, 4, 64,
                                                                                        dtype=i8)
        a = dict(w=w, wt=torch.zeros(k, np_, dtype=i8), scale=torch.ones(np_), wsum=torch.zeros(np_, dtype=torch.int32),
                 bias=torch.zeros(np_), outputs=n, outliers=min(8, k // 8), act_max=127.0)
        a.update(change)
        return a

    W, P = K.Int8Weight(**parts()), K.Int8Weight(**parts(panels=True))
    x, r, g = torch.randn(6, 100), torch.randn(6, 20), torch.randn(20)
    W64 = K.Int8Weight(**parts(32, 64))
    x64, r32, g32, g64 = torch.randn(3, 64), torch.randn(3, 32), torch.randn(32), torch.randn(64)
    bad = {
        "w float32": lambda: K.Int8Weight(**parts(w=torch.zeros(8, 2, 4, 64))),
        "w layout": lambda: K.Int8Weight(**parts(w=torch.zeros(8, 2, 8, 32, dtype=i8))),
        "w 2-D": lambda: K.Int8Weight(**parts(w=torch.zeros(32, 128, dtype=i8))),
        "w meta": lambda: K.Int8Weight(**parts(w=torch.zeros(8, 2, 4, 64, dtype=i8, device="meta"))),
        "w strided": lambda: K.Int8Weight(**parts(w=torch.zeros(2, 8, 4, 64, dtype=i8).transpose(0, 1))),
        "w N' 8": lambda: K.Int8Weight(**parts(w=torch.zeros(2, 2, 4, 64, dtype=i8))),
        "wt K": lambda: K.Int8Weight(**parts(wt=torch.zeros(200, 32, dtype=i8))),
        "wt N'": lambda: K.Int8Weight(**parts(wt=torch.zeros(100, 16, dtype=i8))),
        "wt float32": lambda: K.Int8Weight(**parts(wt=torch.zeros(100, 32))),
        "wt no rows": lambda: K.Int8Weight(**parts(wt=torch.zeros(0, 32, dtype=i8))),
        "scale size": lambda: K.Int8Weight(**parts(scale=torch.ones(20))),
        "scale float64": lambda: K.Int8Weight(**parts(scale=torch.ones(32, dtype=torch.float64))),
        "wsum float32": lambda: K.Int8Weight(**parts(wsum=torch.zeros(32))),
        "bias size": lambda: K.Int8Weight(**parts(bias=torch.zeros(20))),
        "outputs 0": lambda: K.Int8Weight(**parts(outputs=0)),
        "outputs past N'": lambda: K.Int8Weight(**parts(outputs=33)),
        "outputs below N' - 15": lambda: K.Int8Weight(**parts(outputs=16)),
        "outliers past K": lambda: K.Int8Weight(**parts(8, 4, outliers=5)),
        "outliers past 64": lambda: K.Int8Weight(**parts(outliers=65, wt=torch.zeros(100, 32, dtype=i8))),
        "outliers < 0": lambda: K.Int8Weight(**parts(outliers=-1)),
        "act_max 0": lambda: K.Int8Weight(**parts(act_max=0.0)),
        "act_max 128": lambda: K.Int8Weight(**parts(act_max=128.0)),
        # int8_linear(x, weight, residual, act, ln_weight, ln_bias, eps, x_norm_weight, x_norm_bias)
        "x K": lambda: K.int8_linear(torch.randn(6, 99), W),
        "x float64": lambda: K.int8_linear(x.double(), W),
        "x bfloat16": lambda: K.int8_linear(x.bfloat16(), W),
        "x int8": lambda: K.int8_linear(x.to(i8), W),
        "x meta": lambda: K.int8_linear(x.to("meta"), W),
        "x strided": lambda: K.int8_linear(torch.randn(100, 6).t(), W),
        "x 3-D": lambda: K.int8_linear(x[None], W),
        "residual shape": lambda: K.int8_linear(x, W, r[:3]),
        "residual dtype": lambda: K.int8_linear(x, W, r.double()),
        "residual meta": lambda: K.int8_linear(x, W, r.to("meta")),
        "act 5": lambda: K.int8_linear(x, W, None, 5),
        "act -1": lambda: K.int8_linear(x, W, None, -1),
        "norm N 20": lambda: K.int8_linear(x, W, r, 0, g, g, 1e-5),
        "norm without residual": lambda: K.int8_linear(x64, W64, None, 0, g32, g32, 1e-5),
        "norm with act": lambda: K.int8_linear(x64, W64, r32, 1, g32, g32, 1e-5),
        "norm weight only": lambda: K.int8_linear(x64, W64, r32, 0, g32, None, 1e-5),
        "norm size": lambda: K.int8_linear(x64, W64, r32, 0, g32[:16], g32[:16], 1e-5),
        "norm dtype": lambda: K.int8_linear(x64, W64, r32, 0, g32.double(), g32.double(), 1e-5),
        "x norm K 100": lambda: K.int8_linear(x, W, None, 0, None, None, 1e-5, torch.randn(100), torch.randn(100)),
        "x norm size": lambda: K.int8_linear(x64, W64, None, 0, None, None, 1e-5, g32, g32),
        "x norm meta": lambda: K.int8_linear(x64, W64, None, 0, None, None, 1e-5, g64.to("meta"), g64),
    }
    refuse_all(bad)
    # and the good calls run: no rows, one output, K of 1, panels, a LayerNorm either side
    assert K.int8_linear(x[:0], W).shape == (0, 20)
    assert K.int8_linear(torch.randn(3, 1), K.Int8Weight(**parts(1, 1))).shape == (3, 1)
    assert K.int8_linear(x, P, r, 3).shape == (6, 20)
    y = K.int8_linear(x64, W64, r32, 0, g32, torch.zeros(32), 1e-5, g64, torch.zeros(64))
    assert torch.isfinite(y).all() and y.shape == (3, 32)
    print("all", len(bad), "rejected")
''')


def test_direct_int8_calls_with_bad_tensors_raise_and_never_crash():
    if native.kernel() is None:
        pytest.skip(f"native kernel unavailable here: {native.unavailable()}")
    run_refusals(SCRIPT)
