"""The kernels' native entry points check every argument themselves: a direct call with bad tensors is a RuntimeError,
never a crash. Run in a subprocess, since a crash would take the test runner with it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from attnkit.functional import native

# every native variant this CPU runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_variant")

REFUSE_ALL = textwrap.dedent('''
    def refuse_all(bad):
        for name, call in bad.items():
            print(name, flush=True)  # the last name printed is the culprit if the process dies
            try:
                call()
            except RuntimeError:
                continue
            raise SystemExit(f"no error for: {name}")
''')

SCRIPT = REFUSE_ALL + textwrap.dedent('''
    import torch
    from attnkit.functional import native

    K = native.kernel()
    f32, bf16 = torch.float32, torch.bfloat16
    E = torch.empty(0, dtype=torch.int64)

    def qkv(b=2, h=2, lq=5, lk=7, d=16, dv=16, dtype=f32, device="cpu"):
        return (torch.randn(b, h, lq, d, dtype=dtype, device=device),
                torch.randn(b, h, lk, d, dtype=dtype, device=device),
                torch.randn(b, h, lk, dv, dtype=dtype, device=device))

    q, k, v = qkv()
    meta = torch.empty(2, 2, 7, 16, device="meta")
    q3, k3, v3 = (t[:, 0].contiguous() for t in qkv(lq=20, lk=20))
    out3, lse3 = torch.randn(2, 20, 16), torch.randn(2, 20)
    x, w = torch.randn(6, 32), torch.randn(32)
    W = torch.randn(32, 32)

    def pan(n, kk):  # a weight (n, kk) in small_linear's panels (n / 16, kk, 16)
        return torch.randn(n, kk).view(n // 16, 16, kk).transpose(1, 2).contiguous()

    bad = {
        # window_forward(q, k, v, lengths, left, right, scale)
        "wf meta k": lambda: K.window_forward(q, meta, v, E, 2, 2, 0.25),
        "wf all meta": lambda: K.window_forward(*qkv(device="meta"), E, 2, 2, 0.25),
        "wf float64": lambda: K.window_forward(*qkv(dtype=torch.float64), E, 2, 2, 0.25),
        "wf mixed dtypes": lambda: K.window_forward(q, k.bfloat16(), v, E, 2, 2, 0.25),
        "wf 3-D": lambda: K.window_forward(q[0], k[0], v[0], E, 2, 2, 0.25),
        "wf batch differs": lambda: K.window_forward(q, k[:1], v[:1], E, 2, 2, 0.25),
        "wf Lk differs": lambda: K.window_forward(q, k, v[:, :, :3], E, 2, 2, 0.25),
        "wf d differs": lambda: K.window_forward(q, k[..., :8], v, E, 2, 2, 0.25),
        "wf v strided": lambda: K.window_forward(q, k, torch.randn(2, 2, 16, 7).transpose(-1, -2), E, 2, 2, 0.25),
        "wf left < 0": lambda: K.window_forward(q, k, v, E, -1, 2, 0.25),
        "wf lengths size": lambda: K.window_forward(q, k, v, torch.tensor([3, 4, 5]), 2, 2, 0.25),
        "wf lengths int32": lambda: K.window_forward(q, k, v, torch.tensor([3, 4], dtype=torch.int32), 2, 2, 0.25),
        "wf lengths strided": lambda: K.window_forward(q, k, v, torch.tensor([3, 0, 4, 0])[::2], 2, 2, 0.25),
        "wf lengths meta": lambda: K.window_forward(q, k, v, torch.empty(2, dtype=torch.int64, device="meta"),
                                                    2, 2, 0.25),
        # window_backward(q, k, v, out, dout, lse, lengths, left, right, scale)
        "wb out shape": lambda: K.window_backward(q3, k3, v3, out3[:, :3], out3, lse3, E, 2, 2, 0.25),
        "wb dout shape": lambda: K.window_backward(q3, k3, v3, out3, out3[:1], lse3, E, 2, 2, 0.25),
        "wb lse shape": lambda: K.window_backward(q3, k3, v3, out3, out3, lse3[:, :4], E, 2, 2, 0.25),
        "wb k rows": lambda: K.window_backward(q3, k3[:1], v3, out3, out3, lse3, E, 2, 2, 0.25),
        "wb v length": lambda: K.window_backward(q3, k3, v3[:, :4], out3, out3, lse3, E, 2, 2, 0.25),
        "wb strided": lambda: K.window_backward(q3, k3, v3, out3, out3.transpose(0, 1).contiguous().transpose(0, 1),
                                                lse3, E, 2, 2, 0.25),
        "wb float64": lambda: K.window_backward(q3.double(), k3, v3, out3, out3, lse3, E, 2, 2, 0.25),
        "wb meta": lambda: K.window_backward(q3.to("meta"), k3, v3, out3, out3, lse3, E, 2, 2, 0.25),
        "wb d 8": lambda: K.window_backward(q3[..., :8].contiguous(), k3[..., :8].contiguous(), v3, out3, out3,
                                           lse3, E, 2, 2, 0.25),
        "wb lengths": lambda: K.window_backward(q3, k3, v3, out3, out3, lse3, torch.tensor([1]), 2, 2, 0.25),
        # short_forward(q, k, v, lengths, offsets, scale)
        "sf meta": lambda: K.short_forward(*qkv(device="meta"), E, E, 0.25),
        "sf meta v": lambda: K.short_forward(q, k, meta, E, E, 0.25),
        "sf d 8": lambda: K.short_forward(*qkv(d=8), E, E, 0.25),
        "sf q strided": lambda: K.short_forward(torch.randn(2, 2, 16, 5).transpose(-1, -2), k, v, E, E, 0.25),
        "sf offsets Lq != Lk": lambda: K.short_forward(q, k, v, E, torch.tensor([0, 5]), 0.25),
        "sf offsets decrease": lambda: K.short_forward(*qkv(lq=7), E, torch.tensor([0, 5, 3, 7]), 0.25),
        "sf offsets end": lambda: K.short_forward(*qkv(lq=7), E, torch.tensor([0, 5, 9]), 0.25),
        "sf offsets start": lambda: K.short_forward(*qkv(lq=7), E, torch.tensor([2, 7]), 0.25),
        "sf offsets + lengths": lambda: K.short_forward(*qkv(lq=7), torch.tensor([3, 4]), torch.tensor([0, 7]), 0.25),
        "sf offsets int32": lambda: K.short_forward(*qkv(lq=7), E, torch.tensor([0, 7], dtype=torch.int32), 0.25),
        "sf offsets meta": lambda: K.short_forward(*qkv(lq=7), E, torch.empty(2, dtype=torch.int64, device="meta"),
                                                   0.25),
        "sf lengths size": lambda: K.short_forward(q, k, v, torch.tensor([1]), E, 0.25),
        # short_forward(..., rows): a row table (B, >= Lk) of k's rows
        "sf rows short": lambda: K.short_forward(q, k, v, E, E, 0.25, torch.zeros(2, 6, dtype=torch.int64)),
        "sf rows batch": lambda: K.short_forward(q, k, v, E, E, 0.25, torch.zeros(3, 7, dtype=torch.int64)),
        "sf rows int32": lambda: K.short_forward(q, k, v, E, E, 0.25, torch.zeros(2, 7, dtype=torch.int32)),
        "sf rows strided": lambda: K.short_forward(q, k, v, E, E, 0.25, torch.zeros(7, 2, dtype=torch.int64).t()),
        "sf rows value": lambda: K.short_forward(q, k, v, E, E, 0.25, torch.full((2, 7), 2, dtype=torch.int64)),
        "sf rows negative": lambda: K.short_forward(q, k, v, E, E, 0.25, torch.full((2, 7), -1, dtype=torch.int64)),
        "sf rows + offsets": lambda: K.short_forward(*qkv(lq=7), E, torch.tensor([0, 7]), 0.25,
                                                     torch.zeros(2, 7, dtype=torch.int64)),
        "sf rows v batch": lambda: K.short_forward(q, k[:1], v, E, E, 0.25, torch.zeros(2, 7, dtype=torch.int64)),
        # add_norm(x, r, weight, bias, eps)
        "an meta": lambda: K.add_norm(x.to("meta"), x, w, w, 1e-5),
        "an shape": lambda: K.add_norm(x, x[:3], w, w, 1e-5),
        "an weight": lambda: K.add_norm(x, x, w[:16], w, 1e-5),
        "an strided": lambda: K.add_norm(x.t().contiguous().t(), x, w, w, 1e-5),
        "an d 8": lambda: K.add_norm(x[:, :8].contiguous(), x[:, :8].contiguous(), w[:8], w[:8], 1e-5),
        "an dtypes": lambda: K.add_norm(x, x.double(), w, w, 1e-5),
        # small_linear(x, weight, bias, residual, act)
        "sl meta": lambda: K.small_linear(x.to("meta"), W, None, None, 0),
        "sl K differs": lambda: K.small_linear(x, W[:, :16].contiguous(), None, None, 0),
        "sl K 8": lambda: K.small_linear(x[:, :8].contiguous(), W[:, :8].contiguous(), None, None, 0),
        "sl N 8": lambda: K.small_linear(x, W[:8], None, None, 0),
        "sl dtypes": lambda: K.small_linear(x, W.bfloat16(), None, None, 0),
        "sl float64": lambda: K.small_linear(x.double(), W.double(), None, None, 0),
        "sl bias size": lambda: K.small_linear(x, W, w[:16], None, 0),
        "sl residual shape": lambda: K.small_linear(x, W, None, x[:3], 0),
        "sl x strided": lambda: K.small_linear(x.t().contiguous().t(), W, None, None, 0),
        "sl 3-D": lambda: K.small_linear(x[None], W, None, None, 0),
        "sl act": lambda: K.small_linear(x, W, None, None, 5),
        "sl blocked 4 x 8": lambda: K.small_linear(x, W.view(8, 4, 4, 8), None, None, 0),
        "sl blocked K": lambda: K.small_linear(x, W.view(16, 1, 4, 16), None, None, 0),
        "sl norm without residual": lambda: K.small_linear(x, W, None, None, 0, w, w, 1e-5),
        "sl norm with act": lambda: K.small_linear(x, W, None, x, 2, w, w, 1e-5),
        "sl norm weight only": lambda: K.small_linear(x, W, None, x, 0, w, None, 1e-5),
        "sl norm size": lambda: K.small_linear(x, W, None, x, 0, w[:16], w[:16], 1e-5),
        "sl norm dtype": lambda: K.small_linear(x, W, None, x, 0, w.double(), w.double(), 1e-5),
        "sl x norm size": lambda: K.small_linear(x, W, None, None, 0, None, None, 1e-5, w[:16], w[:16]),
        "sl x norm weight only": lambda: K.small_linear(x, W, None, None, 0, None, None, 1e-5, w, None),
        "sl x norm dtype": lambda: K.small_linear(x, W, None, None, 0, None, None, 1e-5, w.double(), w.double()),
        "sl x norm meta": lambda: K.small_linear(x, W, None, None, 0, None, None, 1e-5, w.to("meta"), w),
        # best_tokens(logits, suppressed)
        "bt float64": lambda: K.best_tokens(torch.randn(3, 40).double(), E),
        "bt 3-D": lambda: K.best_tokens(torch.randn(2, 3, 40), E),
        "bt strided": lambda: K.best_tokens(torch.randn(40, 3).t(), E),
        "bt meta": lambda: K.best_tokens(torch.randn(3, 40, device="meta"), E),
        "bt suppressed int32": lambda: K.best_tokens(torch.randn(3, 40), torch.tensor([1], dtype=torch.int32)),
        "bt suppressed range": lambda: K.best_tokens(torch.randn(3, 40), torch.tensor([40])),
        "bt suppressed negative": lambda: K.best_tokens(torch.randn(3, 40), torch.tensor([-1])),
        "bt suppressed unsorted": lambda: K.best_tokens(torch.randn(3, 40), torch.tensor([5, 2])),
        "bt suppressed repeated": lambda: K.best_tokens(torch.randn(3, 40), torch.tensor([2, 2])),
        "sl panels 8 wide": lambda: K.small_linear(x, W.view(4, 32, 8), None, None, 0),
        "sl panels K": lambda: K.small_linear(x, torch.randn(2, 16, 16), None, None, 0),
        "sl panels strided": lambda: K.small_linear(x, torch.randn(2, 16, 32).transpose(1, 2), None, None, 0),
        # bfloat16 panels are pairs of inputs interleaved, (N / 16, K / 2, 16, 2): float32's layout is refused
        "sl bfloat16 panels in float32's layout": lambda: K.small_linear(x.bfloat16(), pan(32, 32).bfloat16(), None,
                                                                         None, 0),
        "sl bfloat16 pairs K": lambda: K.small_linear(x.bfloat16(), torch.zeros(2, 8, 16, 2, dtype=bf16), None, None,
                                                      0),
    }
    if not K.cpu_has_bf16():
        bad["sf bfloat16 without AVX512-BF16"] = lambda: K.short_forward(*qkv(d=32, dtype=bf16), E, E, 0.25)
    refuse_all(bad)
    # and the good calls still run, empty sizes included
    K.window_forward(q, k, v, torch.tensor([7, 0]), 2, 2, 0.25)
    K.window_forward(*qkv(b=0), E, 2, 2, 0.25)
    assert K.window_forward(q, k, v[..., :8], E, 2, 2, 0.25)[0].shape[-1] == 8  # any head size
    assert K.window_forward(q, k, v[..., :0], E, 2, 2, 0.25)[0].numel() == 0
    K.short_forward(*qkv(lq=0, lk=0), E, E, 0.25)
    K.short_forward(*qkv(lq=7), E, torch.tensor([0, 0, 7]), 0.25)
    # a row table: k and v of another batch, values past a row's length never read
    K.short_forward(q, k[:1], v[:1], torch.tensor([3, 7]), E, 0.25, torch.tensor([[0] * 3 + [9] * 4, [0] * 7]))
    K.window_backward(q3, k3, v3, out3, out3, lse3, E, 2, 2, 0.25)
    K.add_norm(x[:0], x[:0], w, w, 1e-5)
    K.small_linear(x[:0], W, w, x[:0], 2)
    K.small_linear(x, W.view(8, 4, 2, 16).permute(0, 2, 1, 3).contiguous(), w, None, 2)
    K.small_linear(x, W, w, x, 0, w, w, 1e-5)
    K.small_linear(x, pan(32, 32), w, x, 0, w, w, 1e-5)
    assert K.best_tokens(torch.randn(0, 40), E)[1].shape == (0,)
    assert K.best_tokens(torch.randn(2, 0), E)[1].tolist() == [-1, -1]  # V = 0: undecided, the reference's
    y = K.small_linear(x, pan(32, 32), None, None, 0, None, None, 1e-5, w, torch.zeros(32))  # LN(x) W^T
    assert torch.isfinite(y).all() and y.shape == (6, 32)
    K.small_linear(x[:0], pan(32, 32), w, None, 1)
    print("all", len(bad), "rejected")
''')


def run_refusals(script: str) -> None:
    """Run ``script`` in a subprocess: every bad call refused, the good ones run, no crash."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode} after: {done.stdout.splitlines()[-1:]}\n{done.stderr[-2000:]}"
    assert done.stdout.strip().splitlines()[-1].startswith("all ") and "rejected" in done.stdout


def test_direct_calls_with_bad_tensors_raise_and_never_crash():
    if native.kernel() is None:
        pytest.skip(f"native kernel unavailable here: {native.unavailable()}")
    run_refusals(SCRIPT)
