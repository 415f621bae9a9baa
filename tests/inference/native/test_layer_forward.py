"""layer_forward (one encoder or NAT decoder layer in one native call, one OpenMP region) against the layer's
maths written out in torch: every row and head count, odd numbers of 16-column panels split over the threads,
both weight layouts, padding (rows with no key at all give zeros), pre- and post-LN, every
activation, one and two threads, float32 and bfloat16 (AVX512-BF16's dot products of pairs in the panels)."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attnkit.functional import native
from attnkit.inference.native import compositions

K = compositions()
BF16 = K is not None and bool(native.kernel().cpu_has_bf16())  # the CPU runs AVX512-BF16
pytestmark = [pytest.mark.skipif(K is None, reason="no native kernel"), pytest.mark.usefixtures("cpu_variant")]
@pytest.fixture(autouse=True, scope="module")
def _variant_kernels(cpu_variant):
    """K and BF16 of the variant under test (the module-level ones above are the default variant's)."""
    global K, BF16
    K = compositions()
    BF16 = K is not None and bool(native.kernel().cpu_has_bf16())


FIELDS = {12: ("qkv", "self_out", "ff1", "ff2", "self_norm", "ff_norm"),
          18: ("qkv", "self_out", "cross_q", "cross_out", "ff1", "ff2", "self_norm", "cross_norm", "ff_norm")}
EPS, ACTS = 1e-5, {0: lambda y: y, 1: F.relu, 2: F.silu, 3: F.gelu, 4: lambda y: F.gelu(y, approximate="tanh")}


def packed(w: torch.Tensor, panels: bool) -> torch.Tensor:
    """W (N, K) in small_linear's panels (float32 (N / 16, K, 16), bfloat16 (N / 16, K / 2, 16, 2): W^T's rows in
    pairs, interleaved) or blocked layout (N / 4, K / 16, 4, 16)."""
    n, k = w.shape
    if panels and w.dtype == torch.bfloat16:  # element (j, c) of panel p at [p, j // 2, c, j % 2]
        return w.view(n // 16, 16, k // 2, 2).permute(0, 2, 1, 3).contiguous()
    if panels:
        return w.view(n // 16, 16, k).transpose(1, 2).contiguous()
    return w.view(n // 4, 4, k // 16, 16).permute(0, 2, 1, 3).contiguous()


def weights(w: list, heads: int, pre: bool, act: int, scale: float):
    """A layer's tensors in the kernels' order (W, b of each linear layer, then weight, bias of each norm) -> its
    ``LayerWeights``, by name."""
    named = {f: (w[2 * i], w[2 * i + 1]) for i, f in enumerate(FIELDS[len(w)])}
    return K.LayerWeights(**named, num_heads=heads, norm_first=pre, act=act, eps=EPS, scale=scale)


def attend(q, k, v, nk, scale):
    """q (B, H, T, dh), k, v (B, H, S, dh), nk (B,) keys each row sees -> (B, H, T, dh); none: zeros."""
    s = q @ k.transpose(-1, -2) * scale
    seen = torch.arange(k.shape[2])[None] < nk[:, None]  # (B, S)
    s = s.masked_fill(~seen[:, None, None], float("-inf"))
    return torch.nan_to_num(s.softmax(-1), nan=0.0) @ v


def reference(x, lin, norms, heads, lens, ck, cv, clens, pre, act, scale):
    b, t, d = x.shape
    dh = d // heads
    ln = [lambda y, g=g, h=h: F.layer_norm(y, (d,), g, h, EPS) for g, h in norms]

    def heads_of(y):  # (B, T, d) -> (B, H, T, dh)
        return y.view(b, -1, heads, dh).transpose(1, 2)

    def merged(o):
        return o.transpose(1, 2).reshape(b, t, d)

    def block(y, i, f):  # pre-LN: y + f(LN_i(y)); post-LN: LN_i(y + f(y))
        return y + f(ln[i](y)) if pre else ln[i](y + f(y))

    def self_attn(y):
        q, k, v = (heads_of(p) for p in F.linear(y, *lin[0]).split(d, -1))
        return F.linear(merged(attend(q, k, v, lens, scale)), *lin[1])

    y = block(x, 0, self_attn)
    if ck is not None:
        y = block(y, 1, lambda z: F.linear(merged(attend(heads_of(F.linear(z, *lin[2])), ck, cv, clens, scale)),
                                           *lin[3]))
    return block(y, len(norms) - 1, lambda z: F.linear(ACTS[act](F.linear(z, *lin[-2])), *lin[-1]))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), d=st.sampled_from([32, 48, 64, 96]), dff=st.sampled_from([32, 48, 96]),
       cross=st.booleans(), panels=st.booleans(), pre=st.booleans(), act=st.integers(0, 4),
       threads=st.sampled_from([1, 2]), padded=st.booleans(), bf16=st.booleans())
def test_layer_forward_gives_the_layer_maths(data, d, dff, cross, panels, pre, act, threads, padded, bf16):
    dh = 32 if bf16 else 16  # the bfloat16 kernel's heads are multiples of 32
    assume(d % dh == 0 and (not bf16 or BF16))
    dt = torch.bfloat16 if bf16 else torch.float32
    b = data.draw(st.integers(1, 3), label="B")
    t = data.draw(st.integers(1, 64 // b), label="T")  # up to PASS_ROWS positions: a CTC row
    heads = d // dh
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2 ** 16), label="seed"))

    def rnd(*shape, std=1.0):  # in the layer's dtype; the reference computes in float32 from the same values
        return (torch.randn(*shape, generator=g) * std).to(dt)

    shapes = [(3 * d, d), (d, d)] + ([(d, d), (d, d)] if cross else []) + [(dff, d), (d, dff)]
    lin = [(rnd(n, k, std=k ** -0.5), rnd(n, std=0.1)) for n, k in shapes]
    norms = [(1 + rnd(d, std=0.1), rnd(d, std=0.1)) for _ in range(3 if cross else 2)]
    w = [p for (wt, bias) in lin for p in (packed(wt, panels), bias)] + [p for n in norms for p in n]
    x = rnd(b, t, d)
    lens = torch.tensor([data.draw(st.integers(0, t)) for _ in range(b)]) if padded else torch.full((b,), t)
    s = data.draw(st.integers(1, 10), label="S")
    ck = rnd(b, heads, s, dh) if cross else None
    cv = rnd(b, heads, s, dh) if cross else None
    clens = torch.tensor([data.draw(st.integers(0, s)) for _ in range(b)]) if padded and cross else torch.full((b,), s)
    scale = 1 / math.sqrt(dh)
    n = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = K.layer_forward(x, weights(w, heads, pre, act, scale), native.lengths_arg(lens if padded else None), ck,
                              cv, native.lengths_arg(clens if padded and cross else None))
    finally:
        torch.set_num_threads(n)

    def f32(v):
        return None if v is None else v.float()

    want = reference(f32(x), [(f32(a), f32(c)) for a, c in lin], [(f32(a), f32(c)) for a, c in norms], heads, lens,
                     f32(ck), f32(cv), clens, pre, act, scale)
    assert out.dtype == dt
    # bfloat16: every intermediate (q, k, v, the attention output, each sub-layer's sum) rounded to 8 bits
    tol = 6e-2 if bf16 else 2e-4
    torch.testing.assert_close(out.float(), want, atol=tol, rtol=tol)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), d=st.sampled_from([32, 64]), cross=st.booleans(), panels=st.booleans(), pre=st.booleans(),
       threads=st.sampled_from([1, 2]), padded=st.booleans(), bf16=st.booleans(), layers=st.integers(1, 4))
def test_layers_forward_is_layer_forward_layer_after_layer(data, d, cross, panels, pre, threads, padded, bf16,
                                                           layers):
    """One call over a stack of layers (one region, shared buffers, outputs in turn in two buffers) gives
    bit for bit what calling layer_forward on each layer in turn gives; each layer its own feed-forward width
    and its own memory."""
    dh = 32 if bf16 else 16
    assume(d % dh == 0 and (not bf16 or BF16))
    dt = torch.bfloat16 if bf16 else torch.float32
    b = data.draw(st.integers(1, 3), label="B")
    t = data.draw(st.integers(1, 64 // b), label="T")  # up to PASS_ROWS positions: a CTC row
    heads, s = d // dh, data.draw(st.integers(1, 10), label="S")
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2 ** 16), label="seed"))

    def rnd(*shape, std=1.0):
        return (torch.randn(*shape, generator=g) * std).to(dt)

    ws, cks, cvs = [], [], []
    for _ in range(layers):
        dff = data.draw(st.sampled_from([32, 48, 96]), label="dff")
        shapes = [(3 * d, d), (d, d)] + ([(d, d), (d, d)] if cross else []) + [(dff, d), (d, dff)]
        lin = [(rnd(n, k, std=k ** -0.5), rnd(n, std=0.1)) for n, k in shapes]
        norms = [(1 + rnd(d, std=0.1), rnd(d, std=0.1)) for _ in range(3 if cross else 2)]
        ws.append([p for (wt, bias) in lin for p in (packed(wt, panels), bias)] + [p for n in norms for p in n])
        cks.append(rnd(b, heads, s, dh) if cross else None)
        cvs.append(rnd(b, heads, s, dh) if cross else None)
    x = rnd(b, t, d)
    lens = native.lengths_arg(torch.tensor([data.draw(st.integers(0, t)) for _ in range(b)]) if padded else None)
    clens = native.lengths_arg(torch.tensor([data.draw(st.integers(0, s)) for _ in range(b)])
                               if padded and cross else None)
    act, scale = data.draw(st.integers(0, 4), label="act"), 1 / math.sqrt(dh)
    n = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        layers = [weights(w, heads, pre, act, scale) for w in ws]
        out = K.layers_forward(x, K.LayerStack(layers), lens, cks if cross else [], cvs if cross else [], clens)
        want = x
        for layer, ck, cv in zip(layers, cks, cvs):
            want = K.layer_forward(want, layer, lens, ck, cv, clens)
    finally:
        torch.set_num_threads(n)
    assert out.shape == x.shape and out.dtype == dt
    assert torch.equal(out, want)
