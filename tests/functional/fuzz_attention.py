"""Fuzz every registered backend (and the automatic choice) against the math path under the NaN / inf policy.

Run as a script (``test_fuzz.py`` starts it in a subprocess, where a crash would only end the child):
``python tests/functional/fuzz_attention.py [max_examples]``. Each example is printed before it runs,
so if the process dies, the last line says which. Per example: backend, grad mode, dtype, empty sizes,
every mask kind, a bias, NaN / +-inf in q, k or v (at a key some query cannot see, or anywhere), large
float16 scores, and tensors on the meta device (mismatched or all). The call must give a ValueError
that ``why_not`` predicted word for word, or run: then shape, dtype and device are right and, for exact
backends, every element is finite exactly where the math path's is and close to it where both are.
"""

from __future__ import annotations

import math
import sys
from collections import Counter

import torch
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import attnkit
from attnkit import masks as M
from attnkit.functional import available_backends, get_backend, native, why_not
from attnkit.functional.bias import ALiBiBias
from attnkit.functional.positional import alibi_slopes

BACKENDS = [*available_backends(), None]  # None: the automatic choice
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
MASKS = ["none", "causal", "window", "padding", "padding&causal", "window&causal&padding", "segments", "graph",
         "dense", "broadcast", "or", "longformer", "strided"]
PLACES = ["none", "none", "q", "k", "v", "k_hidden", "v_hidden", "large"]
DEVICES = ["same"] * 6 + ["k_meta", "v_meta", "mask_meta", "bias_meta", "all_meta"]
TOL = {torch.float64: 1e-7, torch.float32: 2e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}
RAN, RAISED = Counter(), Counter()
FITS = {  # masks each backend takes, so that half the examples reach its kernel
    "graph": ["graph"], "local": ["window", "window&causal&padding"], "short": ["none", "padding", "segments"],
    "tiled": ["none", "causal", "window", "padding&causal", "window&causal&padding"],
    "linear_approx": ["none", "causal", "padding", "padding&causal"], "sparse": ["longformer", "strided"],
}
SELF = ("segments", "graph", "longformer", "strided")  # masks for self-attention: Lq == Lk


def build_mask(kind: str, lead: tuple[int, ...], lq: int, lk: int, data):
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 999), label="mask seed"))
    batch = lead[0] if lead else 1
    lengths = torch.randint(0, lk + 1, (batch,), generator=g)
    if kind == "none":
        return None
    if kind == "causal":
        return M.causal()
    if kind == "window":
        return M.window(data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4)))
    if kind == "padding":
        return M.padding(lengths)
    if kind == "padding&causal":
        return M.padding(lengths) & M.causal()
    if kind == "window&causal&padding":
        return M.window(data.draw(st.integers(0, 6)), 3) & M.causal() & M.padding(lengths)
    if kind == "segments":  # lq == lk here
        cuts = sorted(data.draw(st.lists(st.integers(0, lq), max_size=4), label="cuts"))
        return M.segments([b - a for a, b in zip([0, *cuts], [*cuts, lq])])
    if kind == "graph":  # lq == lk here
        e = data.draw(st.integers(0, 3 * lq), label="edges")
        return M.graph(torch.randint(0, max(lq, 1), (2, e), generator=g) if lq else torch.zeros(2, 0).long(), lq)
    if kind == "dense":
        return torch.rand(*lead[:1], *([1] * max(len(lead) - 1, 0)), lq, lk, generator=g) < 0.6
    if kind == "broadcast":
        return torch.rand(lq, lk, generator=g) < 0.6
    if kind == "longformer":  # lq == lk here
        spots = sorted(set(data.draw(st.lists(st.integers(0, max(lq - 1, 0)), max_size=2), label="globals")))
        band = M.window(data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4)))
        return band | M.global_tokens(spots if lq else [])
    if kind == "strided":  # lq == lk here; the Sparse Transformer's pattern, now and then causal and padded
        s = data.draw(st.integers(1, 4), label="stride")
        m = M.window(s, s) | M.strided(s)
        return m & M.causal() & M.padding(lengths) if data.draw(st.booleans(), label="causal") else m
    return M.causal() | M.padding(lengths)  # "or"


def mask_tensors_to_meta(mask):
    if isinstance(mask, torch.Tensor):
        return mask.to("meta")
    if isinstance(mask, M.Padding):
        return M.Padding(mask.lengths.to("meta"))
    if isinstance(mask, M.Segments):
        return M.Segments(mask.lengths.to("meta"))
    if isinstance(mask, M.Graph):
        return M.Graph(mask.edge_index.to("meta"), mask.num_nodes)
    if isinstance(mask, (M.And, M.Or)):
        return type(mask)(mask_tensors_to_meta(mask.a), mask_tensors_to_meta(mask.b))
    return mask


def has_tensor(mask) -> bool:
    if isinstance(mask, (M.And, M.Or)):
        return has_tensor(mask.a) or has_tensor(mask.b)
    return isinstance(mask, (torch.Tensor, M.Padding, M.Segments, M.Graph))


@given(data=st.data(), backend=st.sampled_from(BACKENDS), grad=st.booleans(), dtype=st.sampled_from(DTYPES),
       lead=st.sampled_from([(), (0,), (1,), (2,), (2, 3), (0, 2), (1, 2, 2)]), lq=st.integers(0, 24),
       lk=st.integers(0, 24), long=st.integers(0, 5), d=st.sampled_from([1, 8, 16, 32]),
       dv=st.sampled_from([8, 16, 32]), kind=st.sampled_from(MASKS), place=st.sampled_from(PLACES),
       value=st.sampled_from([math.nan, math.inf, -math.inf]), device=st.sampled_from(DEVICES),
       bias_kind=st.sampled_from(["none"] * 4 + ["tensor", "row", "alibi"]), dropout=st.sampled_from([0.0] * 9 + [0.3]),
       fit=st.booleans())
def check(data, backend, grad, dtype, lead, lq, lk, long, d, dv, kind, place, value, device, bias_kind, dropout,
          fit):
    if long == 0:  # now and then longer sequences (the native kernels' other paths)
        lq, lk = lq * 4, lk * 4
    if fit and backend is not None:  # half the examples fit what the backend takes
        b = get_backend(backend)
        kind = data.draw(st.sampled_from(FITS.get(backend, MASKS)), label="fitting mask")
        grad, bias_kind, dropout = grad and b.grad, bias_kind if b.bias else "none", dropout if b.dropout else 0.0
        if b.native:
            dtype = data.draw(st.sampled_from(b.dtypes_here() or (torch.float32,)), label="kernel dtype")
            d, dv = max(d, 16) * (2 if dtype == torch.bfloat16 else 1), max(dv, 16)
            device = "same" if device == "all_meta" else device
    if kind in SELF:
        lk = lq
    print(f"{backend} grad={grad} {dtype} lead={lead} lq={lq} lk={lk} d={d} dv={dv} {kind} {place} {value} "
          f"{device} bias={bias_kind} p={dropout}", flush=True)
    g = torch.Generator().manual_seed(lq * 1000 + lk)
    q, k, v = (torch.randn(*lead, n, e, generator=g, dtype=torch.float64) for n, e in ((lq, d), (lk, d), (lk, dv)))
    mask = build_mask(kind, lead, lq, lk, data)
    dense = attnkit.masks.as_mask(mask)
    dense = None if dense is None else dense.materialize(lq, lk, len(lead) + 2).expand(*lead, lq, lk)
    bad = None  # (which tensor, index) of the NaN / inf put in
    if place == "large" and dtype == torch.float16:
        q, k = q * 60, k * 60  # float16 scores past 65504 unless computed in float32
    elif place in ("q", "k", "v") and q.numel() and k.numel() and v.numel():
        t = {"q": q, "k": k, "v": v}[place]
        flat = data.draw(st.integers(0, t.numel() - 1), label="where")
        bad = place, tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), t.shape))
    elif place in ("k_hidden", "v_hidden") and dense is not None and (~dense).any():
        hidden = (~dense).nonzero()  # (n, len(lead) + 2): some query cannot see this key
        at = hidden[data.draw(st.integers(0, len(hidden) - 1), label="which")].tolist()
        t = k if place == "k_hidden" else v
        bad = place[0], (*at[:-2], at[-1], data.draw(st.integers(0, t.shape[-1] - 1), label="feature"))
    clean = None
    if bad is not None:
        clean = tuple(t.to(dtype) for t in (q, k, v))
        {"q": q, "k": k, "v": v}[bad[0]][bad[1]] = value
    q, k, v = (t.to(dtype) for t in (q, k, v))
    bias = None
    if bias_kind == "tensor":
        bias = torch.randn(lq, lk, generator=g).to(dtype)
    elif bias_kind == "row":  # one value per key, broadcast over the queries
        bias = torch.randn(lk, generator=g).to(dtype)
    elif bias_kind == "alibi" and len(lead) >= 2:
        bias = ALiBiBias(alibi_slopes(lead[-1]))
    if device == "k_meta":
        k = k.to("meta")
    elif device == "v_meta":
        v = v.to("meta")
    elif device == "mask_meta" and has_tensor(mask):
        mask = mask_tensors_to_meta(mask)
    elif device == "bias_meta" and isinstance(bias, torch.Tensor):
        bias = bias.to("meta")
    elif device == "all_meta":
        q, k, v, mask = q.to("meta"), k.to("meta"), v.to("meta"), mask_tensors_to_meta(mask)
        bias = bias.to("meta") if isinstance(bias, torch.Tensor) else bias
    if grad:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    kwargs = dict(bias=bias, dropout_p=dropout)
    with torch.set_grad_enabled(grad):
        predicted = why_not(backend or "math", q, k, v, mask, **kwargs) if backend else None
        try:
            out = attnkit.attention(q, k, v, mask, backend=backend, **kwargs)
        except ValueError as e:
            RAISED[backend] += 1
            assert str(e), "an empty error message"
            if backend is not None and predicted is not None:
                assert str(e) == f"attention: {predicted}" or str(e) == predicted, (str(e), predicted)
            elif backend is not None:
                raise AssertionError(f"why_not said it runs, but: {e}") from None
            return
        assert predicted is None, f"why_not predicted {predicted!r} but it ran"
        RAN[backend] += 1
        assert out.shape == (*lead, lq, dv) and out.dtype == dtype and out.device == q.device, out.shape
        if q.device.type == "meta" or dropout > 0:
            return
        ref = attnkit.attention(q, k, v, mask, bias=bias, backend="math")
    if clean is not None:  # 1. rows that cannot see the NaN / inf equal a run without it
        with torch.no_grad():
            without = attnkit.attention(*clean, mask, backend=backend, **kwargs)
        blind = blind_rows(bad, dense, lead, lq, lk)  # (*lead, Lq) bool
        same(out.detach()[blind], without[blind], dtype, "a NaN / inf reached a row that cannot see it")
    if backend is None or get_backend(backend).exact:  # 2. the math path's answer, NaN / inf included
        same(out.detach(), ref.detach(), dtype, "not the math path's answer")


def blind_rows(bad, dense, lead, lq, lk):
    """Rows (*lead, Lq) that cannot see the entry ``bad``: other queries than a bad q row, or queries
    whose mask hides the bad key."""
    which, at = bad
    blind = torch.ones(*lead, lq, dtype=torch.bool)
    if which == "q":
        blind[at[:-1]] = False
        return blind
    sees = torch.ones(*lead, lq, lk, dtype=torch.bool) if dense is None else dense
    blind[at[:-2]] = ~sees[at[:-2]][:, at[-2]]
    return blind


def same(out, ref, dtype, what):
    """Finite exactly where ``ref`` is, and close there."""
    fin, ref_fin = torch.isfinite(out), torch.isfinite(ref)
    if not torch.equal(fin, ref_fin):
        where = (fin != ref_fin).nonzero()[0].tolist()
        raise AssertionError(f"{what}: finite in one and not the other at {where}: {out[tuple(where)]} "
                             f"against {ref[tuple(where)]}")
    torch.testing.assert_close(out[fin].double(), ref[fin].double(), atol=TOL[dtype], rtol=TOL[dtype], msg=what)


if __name__ == "__main__":  # fuzz_attention.py [max_examples [seed]]: a seed explores; without one, repeatable
    explore = len(sys.argv) > 2
    run = settings(max_examples=int(sys.argv[1]) if len(sys.argv) > 1 else 400, deadline=None,
                   derandomize=not explore, database=None, suppress_health_check=list(HealthCheck))(check)
    (seed(int(sys.argv[2]))(run) if explore else run)()
    print("ran:", dict(RAN), "raised:", dict(RAISED), flush=True)
    for backend in BACKENDS:  # every backend really ran on some examples (a backend that always raises fails);
        if backend is not None and get_backend(backend).native and native.kernel() is None:
            continue  # one that needs the native kernel where it cannot run raises, as why_not predicts
        assert RAN[backend] > 0, f"{backend} never ran"
    print("ok")
