"""APPROXIMATE softmax attention from positive random features: Performer's FAVOR+ (Choromanski et al. 2021).

For queries and keys scaled by d^(-1/4), the softmax kernel is an expectation over w ~ N(0, I_d):

    exp(q . k / sqrt(d)) = E_w[ exp(w . q - |q|^2 / 2) exp(w . k - |k|^2 / 2) ],

so with m draws (the rows of ``projection``, (m, d)) the features

    phi(x) = exp(W x - |x|^2 / 2) / sqrt(m)      (m,), all positive

give phi(q) . phi(k) ~ exp(q . k / sqrt(d)), unbiased, with a variance that falls like 1/m; orthogonal
rows (``orthogonal_gaussian``) lower it further. Attention then costs O(L * m * d) as linear attention:
out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j)).

Range: each query's features are scaled by exp(-its max), which cancels in its own ratio; the keys' by
one constant (the max over the sequence's visible keys, or with a causal mask a bound that depends on
no key), which cancels too; the numerator and the normaliser come from one product, so linear
attention's epsilon cancels as well. These
functions have no parameters and no state; the module that owns and redraws ``projection`` is
``attnkit.nn.PerformerAttention``.

Masks: None, ``causal()`` (prefix sums, needs Lq == Lk), ``padding(lengths)`` (hidden keys get
phi = 0, so they never reach an output), and their ``&``. A query with no visible key gets zeros.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .backends.linear import _causal, _noncausal
from .masks import Causal, Mask, Padding, conjuncts

__all__ = ["orthogonal_gaussian", "positive_features", "favor_attention", "linear_masks"]

def orthogonal_gaussian(m: int, d: int, *, generator: torch.Generator | None = None, device=None,
                        dtype=None) -> Tensor:
    """(m, d) random rows: blocks of d orthogonal directions, each row with the norm of a N(0, I_d) draw,
    so every row is marginally N(0, I_d) (the paper's orthogonal random features)."""
    if m < 1 or d < 1:
        raise ValueError(f"orthogonal_gaussian: `m` and `d` must be >= 1, got m={m}, d={d}")
    work = torch.float64 if dtype == torch.float64 else torch.float32
    blocks = []
    for _ in range(-(-m // d)):
        g = torch.randn(d, d, generator=generator, device=device, dtype=work)
        qmat, r = torch.linalg.qr(g)  # (d, d) orthogonal
        qmat = qmat * torch.sign(torch.diagonal(r)).unsqueeze(0)  # a uniformly random rotation
        blocks.append(qmat.T)
    rows = torch.cat(blocks, 0)[:m]  # (m, d) orthonormal within each block
    norms = torch.randn(m, d, generator=generator, device=device, dtype=work).norm(dim=-1, keepdim=True)
    return (rows * norms).to(dtype or torch.get_default_dtype())


def positive_features(x: Tensor, projection: Tensor, *, is_query: bool, keep: Tensor | None = None,
                      causal: bool = False) -> Tensor:
    """FAVOR+ features phi(x): x (..., L, d) already scaled by d^(-1/4), projection (m, d) -> (..., L, m) > 0.

    Scaled for range (each factor cancels in attention's ratio): a query row by exp(-its largest
    exponent); keys by exp(-the largest exponent over the visible rows ``keep`` (bool (..., L, 1), default
    all) of the sequence), or, with ``causal``, by exp(-max_r |w_r|^2 / 2), a bound on every exponent that
    depends on no key, so no key affects the scale of another."""
    proj = x @ projection.transpose(0, 1).to(x.dtype)  # (..., L, m): w . x
    logits = proj - 0.5 * (x * x).sum(-1, keepdim=True)  # (..., L, m): w . x - |x|^2 / 2
    if is_query:
        shift = logits.amax(-1, keepdim=True)  # (..., L, 1)
    elif causal:
        shift = 0.5 * (projection.to(x.dtype) ** 2).sum(-1).amax()  # w . x - |x|^2/2 <= |w|^2/2
    else:
        masked = logits if keep is None else logits.masked_fill(~keep, float("-inf"))
        shift = masked.amax((-1, -2), keepdim=True)  # (..., 1, 1)
        shift = torch.where(torch.isfinite(shift), shift, 0.0)  # every key hidden: any constant will do
    return (logits - shift.detach()).exp() * (projection.shape[0] ** -0.5)


def linear_masks(mask: Mask | None, q: Tensor, k: Tensor, who: str) -> tuple[bool, Tensor | None]:
    """(causal, keep) for kernelised attention: keep (B, 1.., Lk, 1) bool from padding, or None.
    Any other mask raises: these variants cannot honour it."""
    causal, keep = False, None
    for part in conjuncts(mask):
        if isinstance(part, Causal):
            causal = True
        elif isinstance(part, Padding):
            pm = part.materialize(1, k.shape[-2], q.dim(), q.device).transpose(-1, -2)  # (B, 1.., Lk, 1)
            keep = pm if keep is None else keep & pm
        else:
            raise ValueError(f"{who} supports masks causal() and padding() only, got {type(part).__name__}")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"{who}: causal needs Lq == Lk, got q {tuple(q.shape)}, k {tuple(k.shape)}")
    return causal, keep


def favor_attention(q: Tensor, k: Tensor, v: Tensor, projection: Tensor, mask: Mask | None = None) -> Tensor:
    """APPROXIMATE softmax attention (FAVOR+): q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv),
    projection (m, d) -> (..., Lq, dv). Estimates ``attention(q, k, v, mask)`` with scale 1/sqrt(d)."""
    if projection.dim() != 2 or projection.shape[1] != q.shape[-1]:
        raise ValueError(f"favor_attention: `projection` must be (m, {q.shape[-1]}), got {tuple(projection.shape)}")
    causal, keep = linear_masks(mask, q, k, "favor_attention")
    dtype = q.dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    c = q.shape[-1] ** -0.25 if q.shape[-1] else 1.0
    vw = v.to(work)
    if keep is not None:
        keep = keep.expand(*k.shape[:-1], 1)  # (..., Lk, 1)
        vw = torch.where(keep, vw, 0.0)  # hidden values never reach an output, not even as 0 * NaN
        k = torch.where(keep, k, 0)
    fq = positive_features(q.to(work) * c, projection, is_query=True)  # (..., Lq, m)
    fk = positive_features(k.to(work) * c, projection, is_query=False, keep=keep, causal=causal)  # (..., Lk, m)
    if keep is not None:
        fk = fk * keep  # hidden keys: phi = 0
        fq = fq.expand(*fk.shape[:-2], *fq.shape[-2:])
    vw = vw.expand(*fk.shape[:-2], *vw.shape[-2:])
    v1 = torch.cat((vw, torch.ones_like(vw[..., :1])), -1)  # (..., Lk, dv + 1): the last column sums phi(k)
    both = _causal(fq, fk, v1) if causal else _noncausal(fq, fk, v1)  # [num, den] / (den + eps)
    num, den = both[..., :-1], both[..., -1:]  # the eps cancels in num / den
    return (num / den.clamp_min(torch.finfo(den.dtype).tiny)).to(dtype)  # no visible key: 0 / tiny = 0
