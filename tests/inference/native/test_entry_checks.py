"""The native compositions check every argument themselves: a layer's weights when its LayerWeights is made (and a
stack's when its LayerStack is), the rows, caches, keys and lengths of each call. A bad one is a RuntimeError,
never a crash. Run in a subprocess, since a crash would take the test runner with it."""

from __future__ import annotations

import textwrap

import pytest

from attnkit.functional import native as kernels
from attnkit.inference import native
from tests.functional.native.test_entry_checks import REFUSE_ALL, run_refusals

# every native variant this CPU runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_variant")

SCRIPT = REFUSE_ALL + textwrap.dedent('''
    import torch
    from attnkit.inference import native

    K = native.compositions()
    f32, bf16 = torch.float32, torch.bfloat16
    E = torch.empty(0, dtype=torch.int64)

    def blk(n, kk):  # a weight (n, kk) in small_linear's blocked layout
        return torch.randn(n, kk).view(n // 4, 4, kk // 16, 16).permute(0, 2, 1, 3).contiguous()

    def pan(n, kk):  # a weight (n, kk) in small_linear's panels (n / 16, kk, 16)
        return torch.randn(n, kk).view(n // 16, 16, kk).transpose(1, 2).contiguous()

    # a decoder layer (18 tensors: qkv, out, cross q, cross out, ff1, ff2, three norms) blocked, d 32
    DW = [blk(96, 32), torch.randn(96), blk(32, 32), torch.randn(32), blk(32, 32), torch.randn(32),
          blk(32, 32), torch.randn(32), blk(64, 32), torch.randn(64), blk(32, 64), torch.randn(32)]
    DW += [torch.ones(32), torch.zeros(32)] * 3
    # an encoder layer (12 tensors: qkv, out, ff1, ff2, two norms) in panels, d 32
    EW = [pan(96, 32), torch.randn(96), pan(32, 32), torch.randn(32), pan(64, 32), torch.randn(64),
          pan(32, 64), torch.randn(32)] + [torch.ones(32), torch.zeros(32)] * 2
    KB, CK, XS, XL = torch.zeros(8, 2, 2, 16), torch.randn(2, 2, 5, 16), torch.randn(2, 32), torch.randn(2, 5, 32)
    FIELDS = {12: ("qkv", "self_out", "ff1", "ff2", "self_norm", "ff_norm"),
              18: ("qkv", "self_out", "cross_q", "cross_out", "ff1", "ff2", "self_norm", "cross_norm", "ff_norm")}

    def lw(w, heads=2, pre=False, act=1, drop=None):  # a flat list of a layer's tensors -> its LayerWeights
        kw = {f: (w[2 * i], w[2 * i + 1]) for i, f in enumerate(FIELDS[len(w)])}
        if drop is not None:
            kw[drop] = None
        return K.LayerWeights(**kw, num_heads=heads, norm_first=pre, act=act, eps=1e-5, scale=0.25)

    def swap(i, t, *more, base=DW):  # DW (or base) with w[i] = t (and w[i + 1] = more[0], ...)
        w = list(base)
        w[i:i + 1 + len(more)] = [t, *more]
        return w

    SHAPES = dict(qkv=(96, 32), self_out=(32, 32), cross_q=(32, 32), cross_out=(32, 32), ff1=(64, 32), ff2=(32, 64))

    def i8(n, kk, panels=False, bias=True, outputs=None):  # an Int8Weight of an int8 W (n, kk), kk <= 64
        q = torch.randint(-127, 128, (n, kk), dtype=torch.int8)
        w = torch.nn.functional.pad(q, (0, 64 - kk))
        w = (w.view(n // 16, 16, 16, 4).permute(0, 2, 1, 3) if panels else w.view(n // 4, 4, 1, 64).permute(0, 2, 1, 3))
        return K.Int8Weight(w.contiguous(), q.T.contiguous(), torch.rand(n) / 100, 128 * q.sum(1, dtype=torch.int32),
                            torch.randn(n) if bias else torch.zeros(0), outputs=outputs or n, outliers=kk // 8,
                            act_max=127.0)

    def lw8(int8=tuple(SHAPES), base=DW, panels=False, dtype=f32, **change):  # some linear layers int8
        kw = {f: tuple(t.to(dtype) for t in (base[2 * i], base[2 * i + 1])) for i, f in enumerate(FIELDS[len(base)])}
        kw.update({f: i8(*SHAPES[f], panels) for f in int8 if f in kw}, **change)
        return K.LayerWeights(**kw, num_heads=2, norm_first=False, act=1, eps=1e-5, scale=0.25)

    def dls(x=XS, w=DW, keys=KB, values=None, t=0, ck=CK, cv=None, lens=E, group=1, pre=False, act=2, heads=2,
            drop=None, rows=None):
        values = keys.clone() if values is None else values
        return K.decoder_layer_step(x, lw(w, heads, pre, act, drop), keys.clone(), values, t, ck,
                                    ck if cv is None else cv, lens, group, rows)

    def lf(x=XL, w=EW, heads=2, lens=E, ck=None, cv=None, clens=E, pre=False, act=1, drop=None):
        return K.layer_forward(x, lw(w, heads, pre, act, drop), lens, ck, cv, clens)

    def lsf(x=XL, ws=(EW,), lens=E, cks=(), cvs=(), clens=E, heads=2, pre=False, acts=None):
        layers = [lw(w, heads, pre, 1 if acts is None else acts[i]) for i, w in enumerate(ws)]
        return K.layers_forward(x, K.LayerStack(layers), lens, list(cks), list(cvs), clens)

    bad = {
        # LayerWeights(qkv, self_out, ff1, ff2, self_norm, ff_norm, [cross_q, cross_out, cross_norm], settings)
        "lw cross without its norm": lambda: lw(DW, drop="cross_norm"),
        "lw cross without its q": lambda: lw(DW, drop="cross_q"),
        "lw unblocked": lambda: lw(swap(0, torch.randn(96, 32))),
        "lw qkv outputs": lambda: lw(swap(0, blk(64, 32), torch.randn(64))),
        "lw out outputs": lambda: lw(swap(2, pan(48, 32), torch.randn(48), base=EW)),
        "lw ff2 inputs": lambda: lw(swap(10, blk(32, 32))),
        "lw ff1 outputs 20": lambda: lw(swap(8, blk(20, 32), torch.randn(20))),
        "lw bias 0-d": lambda: lw(swap(1, torch.tensor(1.0))),
        "lw bias size": lambda: lw(swap(3, torch.randn(16), base=EW)),
        "lw bias float64": lambda: lw(swap(3, torch.randn(32).double())),
        "lw norm size": lambda: lw(swap(12, torch.ones(16))),
        "lw norm size pre-LN": lambda: lw(swap(16, torch.ones(16)), pre=True),
        "lw norm float64": lambda: lw(swap(8, torch.ones(32).double(), base=EW)),
        "lw norm 2-D": lambda: lw(swap(10, torch.ones(1, 32), base=EW)),
        "lw weight float64": lambda: lw(swap(0, blk(96, 32).double())),
        "lw weight meta": lambda: lw(swap(4, blk(32, 32).to("meta"))),
        "lw weights float64": lambda: lw([t.double() for t in EW]),
        "lw heads 3": lambda: lw(EW, heads=3),
        "lw heads 0": lambda: lw(EW, heads=0),
        "lw head size 8": lambda: lw(EW, heads=4),
        "lw act": lambda: lw(EW, act=9),
        "lw bfloat16 panels in float32's layout": lambda: lw([t.bfloat16() for t in EW], heads=1),
        "lw int8 without a bias": lambda: lw8(ff1=i8(64, 32, bias=False)),
        "lw int8 ff1 outputs": lambda: lw8(ff1=i8(48, 32)),
        "lw int8 qkv inputs": lambda: lw8(qkv=i8(96, 48)),
        "lw int8 outputs not whole": lambda: lw8(self_out=i8(32, 32, outputs=20)),
        "lw int8 with bfloat16 activations": lambda: lw8(("ff1",), dtype=bf16),
        # LayerStack(layers)
        "ls no layers": lambda: K.LayerStack([]),
        "ls kinds mixed": lambda: K.LayerStack([lw(EW), lw(DW)]),
        "ls acts mixed": lambda: K.LayerStack([lw(EW), lw(EW, act=2)]),
        # decoder_layer_step(x, layer, keys, values, t, cross_keys, cross_values, cross_lengths, group)
        "dls encoder layer": lambda: dls(w=EW),
        "dls t capacity": lambda: dls(t=8),
        "dls t < 0": lambda: dls(t=-1),
        "dls group 3": lambda: dls(group=3),
        "dls keys batch": lambda: dls(keys=torch.zeros(8, 3, 2, 16)),
        "dls rows shape": lambda: dls(rows=torch.zeros(2, 0, dtype=torch.long)),
        "dls rows int32": lambda: dls(rows=torch.zeros(2, 8, dtype=torch.int32)),
        "dls rows out of the keys": lambda: dls(t=1, rows=torch.tensor([[2, 1], [0, 1]])),
        "dls rows at t": lambda: dls(t=1, rows=torch.tensor([[0, 0], [0, 0]])),
        "dls keys narrower than x with rows": lambda: dls(keys=torch.zeros(8, 1, 2, 16), rows=torch.zeros(2, 8).long()),
        "dls keys heads": lambda: dls(keys=torch.zeros(8, 2, 4, 8)),
        "dls keys strided": lambda: dls(keys=torch.zeros(8, 2, 16, 2).transpose(2, 3)),
        "dls values shape": lambda: dls(values=torch.zeros(4, 2, 2, 16)),
        "dls cross batch": lambda: dls(ck=torch.randn(1, 2, 5, 16)),
        "dls cross values": lambda: dls(cv=torch.randn(2, 2, 4, 16)),
        "dls keys meta": lambda: dls(keys=torch.zeros(8, 2, 2, 16, device="meta")),
        "dls x meta": lambda: dls(x=XS.to("meta")),
        "dls x float64": lambda: dls(x=XS.double()),
        "dls x 3-D": lambda: dls(x=XS[None]),
        "dls x d": lambda: dls(x=torch.randn(2, 48)),
        "dls lengths size": lambda: dls(lens=torch.tensor([1, 2, 3])),
        "dls keys float64": lambda: dls(keys=KB.double()),
        "dls cross float64": lambda: dls(ck=CK.double()),
        "dls cross strided": lambda: dls(ck=torch.randn(2, 2, 16, 5).transpose(2, 3)),
        # layer_forward(x, layer, lengths, cross_keys, cross_values, cross_lengths)
        "lf x 2-D": lambda: lf(x=XL[0]),
        "lf x strided": lambda: lf(x=XL.transpose(0, 1).contiguous().transpose(0, 1)),
        "lf x meta": lambda: lf(x=XL.to("meta")),
        "lf x float64": lambda: lf(x=XL.double()),
        "lf x d": lambda: lf(x=torch.randn(2, 5, 48)),
        "lf lengths size": lambda: lf(lens=torch.tensor([1, 2, 3])),
        "lf lengths int32": lambda: lf(lens=torch.tensor([1, 2], dtype=torch.int32)),
        "lf cross keys with an encoder layer": lambda: lf(ck=CK, cv=CK),
        "lf no cross keys with a decoder layer": lambda: lf(w=DW),
        "lf cross batch": lambda: lf(w=DW, ck=torch.randn(1, 2, 5, 16), cv=torch.randn(1, 2, 5, 16)),
        "lf cross values": lambda: lf(w=DW, ck=CK, cv=torch.randn(2, 2, 4, 16)),
        "lf cross lengths": lambda: lf(w=DW, ck=CK, cv=CK, clens=torch.tensor([9])),
        "lf cross float64": lambda: lf(w=DW, ck=CK.double(), cv=CK.double()),
        "lf cross strided": lambda: lf(w=DW, ck=torch.randn(2, 2, 16, 5).transpose(2, 3), cv=CK),
        "lf cross meta": lambda: lf(w=DW, ck=CK.to("meta"), cv=CK),
        # layers_forward(x, stack, lengths, cross_keys, cross_values, cross_lengths)
        "lsf layer 1 qkv outputs": lambda: lsf(ws=(EW, swap(0, pan(64, 32), torch.randn(64), base=EW))),
        "lsf cross keys with encoder layers": lambda: lsf(cks=(CK,), cvs=(CK,)),
        "lsf one cross for two": lambda: lsf(ws=(DW, DW), cks=(CK,), cvs=(CK,)),
        "lsf cross values missing": lambda: lsf(ws=(DW,), cks=(CK,)),
        "lsf cross batch": lambda: lsf(ws=(DW, DW), cks=(CK, torch.randn(1, 2, 5, 16)), cvs=(CK, CK)),
        "lsf cross S differs": lambda: lsf(ws=(DW, DW), cks=(CK, CK), cvs=(CK, torch.randn(2, 2, 4, 16))),
        "lsf cross meta": lambda: lsf(ws=(DW,), cks=(CK.to("meta"),), cvs=(CK,)),
        "lsf x float64": lambda: lsf(x=XL.double()),
        "lsf lengths size": lambda: lsf(lens=torch.tensor([1, 2, 3])),
        "lsf heads 3": lambda: lsf(heads=3),
    }
    refuse_all(bad)
    # and the good calls still run, empty sizes included
    assert dls().shape == (2, 32) and dls(pre=True, t=3).shape == (2, 32)
    assert dls(group=2, ck=CK[:1], lens=torch.tensor([3])).shape == (2, 32)
    assert dls(x=XS[:0], keys=KB[:, :0], ck=CK[:0]).shape == (0, 32)
    assert dls(keys=torch.zeros(8, 3, 2, 16), t=1, rows=torch.tensor([[2, 0], [2, 1]])).shape == (2, 32)
    assert dls(w=[pan(t.shape[0] * 4, t.shape[1] * 16) if t.dim() == 4 else t for t in DW]).shape == (2, 32)
    assert lf().shape == (2, 5, 32) and lf(pre=True, lens=torch.tensor([5, 2])).shape == (2, 5, 32)
    assert lf(w=DW, ck=CK, cv=CK, clens=torch.tensor([5, 3])).shape == (2, 5, 32)  # blocked weights too
    assert lf(x=XL[:0], w=DW, ck=CK[:0], cv=CK[:0]).shape == (0, 5, 32)
    assert lf(x=XL[:, :0]).shape == (2, 0, 32)
    assert lsf(ws=(EW, EW, EW), pre=True).shape == (2, 5, 32)
    assert lsf(ws=(DW, DW), cks=(CK, CK), cvs=(CK, CK)).shape == (2, 5, 32)
    assert lsf(x=XL[:, :0], ws=(EW, EW)).shape == (2, 0, 32)
    # int8 linear layers: a decoding step (blocked), an encoder layer (panels), some layers float
    assert K.decoder_layer_step(XS, lw8(), KB.clone(), KB.clone(), 0, CK, CK, E, 1).shape == (2, 32)
    assert K.decoder_layer_step(XS[:0], lw8(("ff2",)), KB[:, :0].clone(), KB[:, :0].clone(), 0, CK[:0], CK[:0], E,
                                1).shape == (0, 32)
    assert K.layer_forward(XL, lw8(base=EW, panels=True), E, None, None, E).shape == (2, 5, 32)
    print("all", len(bad), "rejected")
''')


def test_direct_calls_with_bad_tensors_raise_and_never_crash():
    if native.compositions() is None:
        pytest.skip(f"native kernel unavailable here: {kernels.unavailable()}")
    run_refusals(SCRIPT)
