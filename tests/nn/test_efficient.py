"""The efficient attention modules: same call as MultiHeadAttention, exact ones equal the reference,
approximate ones checked for their defining property, and masks they cannot honour refused."""

import pytest
import torch

from attnkit import masks as M
from attnkit.nn import (
    VARIANTS,
    LinformerAttention,
    MultiHeadAttention,
    NystromAttention,
    PerformerAttention,
    StructuredAttention,
    build_attention,
)


def _copy_projections(dst, src):
    dst.load_state_dict({k: v for k, v in src.state_dict().items() if k in dict(dst.named_parameters())},
                        strict=False)


def _x(b=2, length=24, d=16, seed=0):
    return torch.randn(b, length, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_structured_equals_masked_multihead_reference():
    mha = MultiHeadAttention(16, 2, dtype=torch.float64)
    pattern = M.window(2, 2) | M.global_tokens(1)
    sa = StructuredAttention(16, 2, pattern=pattern, default_backend="sparse", dtype=torch.float64)
    _copy_projections(sa, mha)
    x, pad = _x(), M.padding([24, 11])
    out = sa(x, mask=pad).out
    ref = mha(x, mask=pattern & pad, backend="math").out
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(sa(x, mask=pad, backend="math").out, ref)  # a named backend still wins


def test_linformer_with_identity_projections_is_full_attention():
    """k = L and E = F = I: Linformer is exactly softmax attention (its projection is the only change)."""
    mha = MultiHeadAttention(16, 2, dtype=torch.float64)
    lin = LinformerAttention(16, 2, max_len=24, k=24, dtype=torch.float64)
    _copy_projections(lin, mha)
    with torch.no_grad():
        lin.e.copy_(torch.eye(24, dtype=torch.float64))
        lin.f.copy_(torch.eye(24, dtype=torch.float64))
    x = _x()
    torch.testing.assert_close(lin(x).out, mha(x, backend="math").out, atol=1e-12, rtol=1e-10)
    perm = torch.randperm(24)  # any permutation of the keys: still exact (attention ignores key order)
    with torch.no_grad():
        lin.e.copy_(torch.eye(24, dtype=torch.float64)[perm])
        lin.f.copy_(torch.eye(24, dtype=torch.float64)[perm])
    torch.testing.assert_close(lin(x).out, mha(x, backend="math").out, atol=1e-12, rtol=1e-10)


def test_linformer_shorter_inputs_and_hidden_positions():
    lin = LinformerAttention(16, 2, max_len=40, k=8, dtype=torch.float64)
    x = _x(length=30)
    dirty = x.clone()
    dirty[1, 20:] = float("nan")
    out = lin(dirty, mask=M.padding([30, 20])).out
    assert torch.isfinite(out[1, :20]).all() and torch.isfinite(out[0]).all()
    clean = x.clone()
    clean[1, 20:] = 3.0
    torch.testing.assert_close(out[1, :20], lin(clean, mask=M.padding([30, 20])).out[1, :20])
    with pytest.raises(ValueError, match="causal"):
        lin(x, mask=M.causal())
    with pytest.raises(ValueError, match="exceeds max_len"):
        lin(_x(length=41))


def test_nystrom_module_with_all_landmarks_is_full_attention():
    mha = MultiHeadAttention(16, 2, dtype=torch.float64)
    ny = NystromAttention(16, 2, num_landmarks=24, pinv_iterations=None, dtype=torch.float64)
    _copy_projections(ny, mha)
    x, pad = _x(), M.padding([24, 24])
    torch.testing.assert_close(ny(x, mask=pad).out, mha(x, mask=pad, backend="math").out, atol=1e-9, rtol=1e-7)
    with pytest.raises(ValueError, match="padding\\(\\) masks only"):
        ny(x, mask=M.causal())


def test_performer_estimates_full_attention_and_redraws():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2)
    perf = PerformerAttention(16, 2, num_features=4096, redraw_every=2)
    _copy_projections(perf, mha)
    x = _x().float() * 0.5
    perf.eval()  # no redraw, no count
    err = (perf(x).out - mha(x).out).abs().mean()
    assert err < 0.02 * mha(x).out.abs().mean() + 1e-3
    perf.train()
    p0 = perf.projection.clone()
    perf(x)
    perf(x)
    assert torch.equal(perf.projection, p0)  # calls 0 and 1
    perf(x)
    assert not torch.equal(perf.projection, p0)  # redrawn before call 2
    assert "projection" in perf.state_dict() and int(perf.calls) == 3
    causal = perf.eval()(x, mask=M.causal()).out
    assert torch.isfinite(causal).all()


@pytest.mark.parametrize("cls,kw", [(LinformerAttention, {"max_len": 8}), (NystromAttention, {}),
                                    (PerformerAttention, {})])
def test_approximate_modules_refuse_weights_cache_and_dropout(cls, kw):
    m = cls(16, 2, **kw)
    x = torch.randn(1, 8, 16)
    with pytest.raises(ValueError, match="weights"):
        m(x, need_weights=True)
    with pytest.raises(ValueError, match="cache"):
        m(x, use_cache=True)
    with pytest.raises(ValueError, match="backend"):
        m(x, backend="math")
    with pytest.raises(ValueError, match="dropout"):
        cls(16, 2, dropout=0.1, **kw)


def test_registry_marks_exact_and_builds_every_variant():
    assert {v for v, spec in VARIANTS.items() if spec.exact} == {"full", "local", "longformer", "sparse"}
    x = torch.randn(2, 50, 16)
    for name in VARIANTS:
        m = build_attention(name, 16, 2, max_len=50)
        out = m(x, mask=M.padding([50, 30]))
        assert out.out.shape == (2, 50, 16) and torch.isfinite(out.out).all(), name
    with pytest.raises(ValueError, match="unknown options"):
        build_attention("performer", 16, 2, max_len=50, options={"window": 3})
    with pytest.raises(ValueError, match="unknown name"):
        build_attention("reformer", 16, 2, max_len=50)
