"""The native entry points check every argument themselves: a direct call with bad tensors is a RuntimeError,
never a crash. Run in a subprocess, since a crash would take the test runner with it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from attnkit.functional import native

SCRIPT = textwrap.dedent('''
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

    def blk(n, kk):  # a weight (n, kk) in small_linear's blocked layout
        return torch.randn(n, kk).view(n // 4, 4, kk // 16, 16).permute(0, 2, 1, 3).contiguous()

    DW = [blk(96, 32), torch.randn(96), blk(32, 32), torch.randn(32), blk(32, 32), torch.randn(32),
          blk(32, 32), torch.randn(32), blk(64, 32), torch.randn(64), blk(32, 64), torch.randn(32)]
    DW += [torch.ones(32), torch.zeros(32)] * 3
    KB, CK, XS = torch.zeros(8, 2, 2, 16), torch.randn(2, 2, 5, 16), torch.randn(2, 32)

    def dls(x=XS, w=DW, keys=KB, values=None, t=0, ck=CK, cv=None, lens=E, group=1, pre=False, act=2):
        values = keys.clone() if values is None else values
        return K.decoder_layer_step(x, w, keys.clone(), values, t, ck, ck if cv is None else cv, lens, group, pre,
                                    act, 1e-5, 0.25)

    def swap(i, t, *more, base=DW):  # DW (or base) with w[i] = t (and w[i + 1] = more[0], ...)
        w = list(base)
        w[i:i + 1 + len(more)] = [t, *more]
        return w

    def pan(n, kk):  # a weight (n, kk) in small_linear's panels (n / 16, kk, 16)
        return torch.randn(n, kk).view(n // 16, 16, kk).transpose(1, 2).contiguous()

    # an encoder layer (12 tensors: qkv, out, ff1, ff2, two norms) in panels, d 32, 2 heads
    EW = [pan(96, 32), torch.randn(96), pan(32, 32), torch.randn(32), pan(64, 32), torch.randn(64),
          pan(32, 64), torch.randn(32)] + [torch.ones(32), torch.zeros(32)] * 2
    XL = torch.randn(2, 5, 32)

    def lf(x=XL, w=EW, heads=2, lens=E, ck=None, cv=None, clens=E, pre=False, act=1):
        return K.layer_forward(x, w, heads, lens, ck, cv, clens, pre, act, 1e-5, 0.25)

    bad = {
        # decoder_layer_step(x, w, keys, values, t, cross_keys, cross_values, cross_lengths, group, ...)
        "dls w 17": lambda: dls(w=DW[:17]),
        "dls t capacity": lambda: dls(t=8),
        "dls t < 0": lambda: dls(t=-1),
        "dls group 3": lambda: dls(group=3),
        "dls keys batch": lambda: dls(keys=torch.zeros(8, 3, 2, 16)),
        "dls keys strided": lambda: dls(keys=torch.zeros(8, 2, 16, 2).transpose(2, 3)),
        "dls values shape": lambda: dls(values=torch.zeros(4, 2, 2, 16)),
        "dls cross batch": lambda: dls(ck=torch.randn(1, 2, 5, 16)),
        "dls cross values": lambda: dls(cv=torch.randn(2, 2, 4, 16)),
        "dls unblocked": lambda: dls(w=swap(0, torch.randn(96, 32))),
        "dls qkv outputs": lambda: dls(w=swap(0, blk(64, 32), torch.randn(64))),
        "dls keys meta": lambda: dls(keys=torch.zeros(8, 2, 2, 16, device="meta")),
        "dls ff2 inputs": lambda: dls(w=swap(10, blk(32, 32))),
        "dls bias 0-d": lambda: dls(w=swap(1, torch.tensor(1.0))),
        "dls bias float64": lambda: dls(w=swap(3, torch.randn(32).double())),
        "dls norm size": lambda: dls(w=swap(12, torch.ones(16))),
        "dls norm size pre-LN": lambda: dls(w=swap(16, torch.ones(16)), pre=True),
        "dls x meta": lambda: dls(x=XS.to("meta")),
        "dls x float64": lambda: dls(x=XS.double()),
        "dls x 3-D": lambda: dls(x=XS[None]),
        "dls lengths size": lambda: dls(lens=torch.tensor([1, 2, 3])),
        "dls act": lambda: dls(act=9),
        "dls keys float64": lambda: dls(keys=KB.double()),
        "dls keys meta": lambda: dls(keys=KB.to("meta")),
        "dls weight float64": lambda: dls(w=swap(0, blk(96, 32).double())),
        "dls weight meta": lambda: dls(w=swap(4, blk(32, 32).to("meta"))),
        "dls cross float64": lambda: dls(ck=CK.double()),
        "dls cross strided": lambda: dls(ck=torch.randn(2, 2, 16, 5).transpose(2, 3)),
        "dls cross values S": lambda: dls(cv=torch.randn(2, 2, 4, 16)),
        "dls head size 8": lambda: dls(keys=torch.zeros(8, 2, 4, 8)),
        "dls ff1 outputs 20": lambda: dls(w=swap(8, blk(20, 32), torch.randn(20))),
        "dls cross lengths size": lambda: dls(lens=torch.tensor([1, 2, 3])),
        # layer_forward(x, w, num_heads, lengths, cross_keys, cross_values, cross_lengths, norm_first, act, ...)
        "lf w 13": lambda: lf(w=EW + [torch.ones(32)]),
        "lf x 2-D": lambda: lf(x=XL[0]),
        "lf x strided": lambda: lf(x=XL.transpose(0, 1).contiguous().transpose(0, 1)),
        "lf x meta": lambda: lf(x=XL.to("meta")),
        "lf x float64": lambda: lf(x=XL.double()),
        "lf heads 3": lambda: lf(heads=3),
        "lf heads 0": lambda: lf(heads=0),
        "lf unpacked": lambda: lf(w=swap(0, torch.randn(96, 32), base=EW)),
        "lf qkv outputs": lambda: lf(w=swap(0, pan(64, 32), torch.randn(64), base=EW)),
        "lf out outputs": lambda: lf(w=swap(2, pan(48, 32), torch.randn(48), base=EW)),
        "lf ff2 inputs": lambda: lf(w=swap(6, pan(32, 32), base=EW)),
        "lf bias size": lambda: lf(w=swap(3, torch.randn(16), base=EW)),
        "lf bias float64": lambda: lf(w=swap(5, torch.randn(64).double(), base=EW)),
        "lf norm size": lambda: lf(w=swap(8, torch.ones(16), base=EW)),
        "lf lengths size": lambda: lf(lens=torch.tensor([1, 2, 3])),
        "lf lengths int32": lambda: lf(lens=torch.tensor([1, 2], dtype=torch.int32)),
        "lf act": lambda: lf(act=9),
        "lf cross keys with 12": lambda: lf(ck=CK, cv=CK),
        "lf no cross keys with 18": lambda: lf(w=DW),
        "lf cross batch": lambda: lf(w=DW, ck=torch.randn(1, 2, 5, 16), cv=torch.randn(1, 2, 5, 16)),
        "lf cross values": lambda: lf(w=DW, ck=CK, cv=torch.randn(2, 2, 4, 16)),
        "lf cross lengths": lambda: lf(w=DW, ck=CK, cv=CK, clens=torch.tensor([9])),
        "lf cross float64": lambda: lf(w=DW, ck=CK.double(), cv=CK.double()),
        "lf cross strided": lambda: lf(w=DW, ck=torch.randn(2, 2, 16, 5).transpose(2, 3), cv=CK),
        "lf cross meta": lambda: lf(w=DW, ck=CK.to("meta"), cv=CK),
        "lf head size 8": lambda: lf(heads=4),
        "lf weight float64": lambda: lf(w=swap(0, pan(96, 32).double(), base=EW)),
        "lf weight meta": lambda: lf(w=swap(4, pan(64, 32).to("meta"), base=EW)),
        "lf norm float64": lambda: lf(w=swap(8, torch.ones(32).double(), base=EW)),
        "lf norm 2-D": lambda: lf(w=swap(10, torch.ones(1, 32), base=EW)),
        # layers_forward(x, ws, num_heads, lengths, cross_keys, cross_values, cross_lengths, norm_first, act, ...)
        "lsf no layers": lambda: K.layers_forward(XL, [], 2, E, [], [], E, False, 1, 1e-5, 0.25),
        "lsf layer 1 qkv outputs": lambda: K.layers_forward(XL, [EW, swap(0, pan(64, 32), torch.randn(64), base=EW)],
                                                           2, E, [], [], E, False, 1, 1e-5, 0.25),
        "lsf layer 1 w 13": lambda: K.layers_forward(XL, [EW, EW + [torch.ones(32)]], 2, E, [], [], E, False, 1,
                                                    1e-5, 0.25),
        "lsf kinds mixed": lambda: K.layers_forward(XL, [EW, DW], 2, E, [], [], E, False, 1, 1e-5, 0.25),
        "lsf cross keys with 12": lambda: K.layers_forward(XL, [EW], 2, E, [CK], [CK], E, False, 1, 1e-5, 0.25),
        "lsf one cross for two": lambda: K.layers_forward(XL, [DW, DW], 2, E, [CK], [CK], E, False, 1, 1e-5, 0.25),
        "lsf cross values missing": lambda: K.layers_forward(XL, [DW], 2, E, [CK], [], E, False, 1, 1e-5, 0.25),
        "lsf cross batch": lambda: K.layers_forward(XL, [DW, DW], 2, E, [CK, torch.randn(1, 2, 5, 16)], [CK, CK], E,
                                                    False, 1, 1e-5, 0.25),
        "lsf cross S differs": lambda: K.layers_forward(XL, [DW, DW], 2, E, [CK, CK], [CK, torch.randn(2, 2, 4, 16)],
                                                        E, False, 1, 1e-5, 0.25),
        "lsf cross meta": lambda: K.layers_forward(XL, [DW], 2, E, [CK.to("meta")], [CK], E, False, 1, 1e-5, 0.25),
        "lsf x float64": lambda: K.layers_forward(XL.double(), [EW], 2, E, [], [], E, False, 1, 1e-5, 0.25),
        "lsf heads 3": lambda: K.layers_forward(XL, [EW], 3, E, [], [], E, False, 1, 1e-5, 0.25),
        "lsf act": lambda: K.layers_forward(XL, [EW], 2, E, [], [], E, False, 9, 1e-5, 0.25),
        "lsf lengths size": lambda: K.layers_forward(XL, [EW], 2, torch.tensor([1, 2, 3]), [], [], E, False, 1, 1e-5,
                                                     0.25),
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
        "wf dv 8": lambda: K.window_forward(q, k, v[..., :8], E, 2, 2, 0.25),
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
        "lf bfloat16 panels in float32's layout": lambda: lf(XL.bfloat16(), [t.bfloat16() for t in EW], heads=1),
    }
    if not K.cpu_has_bf16():
        bad["sf bfloat16 without AVX512-BF16"] = lambda: K.short_forward(*qkv(d=32, dtype=bf16), E, E, 0.25)
    for name, call in bad.items():
        print(name, flush=True)  # the last name printed is the culprit if the process dies
        try:
            call()
        except RuntimeError:
            continue
        raise SystemExit(f"no error for: {name}")
    # and the good calls still run, empty sizes included
    K.window_forward(q, k, v, torch.tensor([7, 0]), 2, 2, 0.25)
    K.window_forward(*qkv(b=0), E, 2, 2, 0.25)
    K.short_forward(*qkv(lq=0, lk=0), E, E, 0.25)
    K.short_forward(*qkv(lq=7), E, torch.tensor([0, 0, 7]), 0.25)
    K.window_backward(q3, k3, v3, out3, out3, lse3, E, 2, 2, 0.25)
    K.add_norm(x[:0], x[:0], w, w, 1e-5)
    K.small_linear(x[:0], W, w, x[:0], 2)
    K.small_linear(x, W.view(8, 4, 2, 16).permute(0, 2, 1, 3).contiguous(), w, None, 2)
    K.small_linear(x, W, w, x, 0, w, w, 1e-5)
    assert dls().shape == (2, 32) and dls(pre=True, t=3).shape == (2, 32)
    assert dls(group=2, ck=CK[:1], lens=torch.tensor([3])).shape == (2, 32)
    assert dls(x=XS[:0], keys=KB[:, :0], ck=CK[:0]).shape == (0, 32)
    K.small_linear(x, pan(32, 32), w, x, 0, w, w, 1e-5)
    assert K.best_tokens(torch.randn(0, 40), E)[1].shape == (0,)
    assert K.best_tokens(torch.randn(2, 0), E)[1].tolist() == [-1, -1]  # V = 0: undecided, the reference's
    y = K.small_linear(x, pan(32, 32), None, None, 0, None, None, 1e-5, w, torch.zeros(32))  # LN(x) W^T
    assert torch.isfinite(y).all() and y.shape == (6, 32)
    K.small_linear(x[:0], pan(32, 32), w, None, 1)
    assert lf().shape == (2, 5, 32) and lf(pre=True, lens=torch.tensor([5, 2])).shape == (2, 5, 32)
    assert lf(w=DW, ck=CK, cv=CK, clens=torch.tensor([5, 3])).shape == (2, 5, 32)  # blocked weights too
    assert lf(x=XL[:0], w=DW, ck=CK[:0], cv=CK[:0]).shape == (0, 5, 32)
    assert lf(x=XL[:, :0]).shape == (2, 0, 32)
    assert K.layers_forward(XL, [EW, EW, EW], 2, E, [], [], E, True, 1, 1e-5, 0.25).shape == (2, 5, 32)
    assert K.layers_forward(XL, [DW, DW], 2, E, [CK, CK], [CK, CK], E, False, 1, 1e-5, 0.25).shape == (2, 5, 32)
    assert K.layers_forward(XL[:, :0], [EW, EW], 2, E, [], [], E, False, 1, 1e-5, 0.25).shape == (2, 0, 32)
    print("all", len(bad), "rejected")
''')


def test_direct_calls_with_bad_tensors_raise_and_never_crash():
    if native.kernel() is None:
        pytest.skip(f"native kernel unavailable here: {native.unavailable()}")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode} after: {done.stdout.splitlines()[-1:]}\n{done.stderr[-2000:]}"
    assert done.stdout.strip().splitlines()[-1].startswith("all ") and "rejected" in done.stdout
