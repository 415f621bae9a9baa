"""APPROXIMATE softmax attention from m landmarks: Nyströmformer (Xiong et al. 2021).

The landmarks are segment means: positions are cut into m contiguous segments and each segment's
queries and keys are averaged into q~ (m, d), k~ (m, d). With S(a, b) = softmax(a b^T * scale),

    out = S(q, k~) · pinv(S(q~, k~)) · (S(q~, k) v)            (L, m) (m, m) (m, dv)

costs O(L * m) instead of O(L^2). Its defining identity: with m = L every landmark is one token,
the three kernels are the full softmax matrix S, and S · pinv(S) · S = S, so the output is exact
softmax attention (with the exact pseudo-inverse). The paper replaces pinv by ``pinv_iterations``
Newton-Schulz steps (Z <- Z (13 I - KZ (15 I - KZ (7 I - KZ))) / 4, from Z0 = K^T / (|K|_1 |K|_inf));
``pinv_iterations=None`` uses ``torch.linalg.pinv``.

Masks: None or ``padding(lengths)``: hidden positions are left out of every landmark mean and of
S(q~, k), so they never reach an output; a segment with no visible position is a dead landmark
(its rows and columns are zero). ``causal()`` and other masks raise: landmarks mix the future in.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .masks import Mask, Padding, conjuncts

__all__ = ["nystrom_attention", "newton_schulz_pinv"]


def newton_schulz_pinv(a: Tensor, iterations: int) -> Tensor:
    """Iterative Moore-Penrose pseudo-inverse of a (..., m, m), as the Nyströmformer paper."""
    absa = a.abs()
    norm = absa.sum(-1).amax(-1) * absa.sum(-2).amax(-1)  # (...,) |A|_inf |A|_1
    z = a.transpose(-1, -2) / norm.clamp_min(1e-30)[..., None, None]
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


def _masked_softmax(s: Tensor, ok: Tensor) -> Tensor:
    """Softmax over the last dim where ``ok``; rows with nothing allowed give zeros."""
    live = ok.any(-1, keepdim=True)
    return s.masked_fill(~(ok | ~live), float("-inf")).softmax(-1) * live


def nystrom_attention(q: Tensor, k: Tensor, v: Tensor, num_landmarks: int, mask: Mask | None = None, *,
                      scale: float | None = None, pinv_iterations: int | None = 6) -> Tensor:
    """APPROXIMATE attention: q (..., L, d), k (..., L, d), v (..., L, dv) -> (..., L, dv).

    ``num_landmarks`` m >= 1 (more than L is the same as L)."""
    if not isinstance(num_landmarks, int) or num_landmarks < 1:
        raise ValueError(f"nystrom_attention: `num_landmarks` must be an integer >= 1, got {num_landmarks!r}")
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"nystrom_attention: needs Lq == Lk, got q {tuple(q.shape)}, k {tuple(k.shape)}")
    keep = None
    for part in conjuncts(mask):
        if not isinstance(part, Padding):
            raise ValueError(f"nystrom_attention supports padding() masks only (landmarks average over the whole "
                             f"sequence, so causal and structured masks cannot be honoured), got {type(part).__name__}")
        pm = part.materialize(1, k.shape[-2], q.dim(), q.device).transpose(-1, -2)  # (B, 1.., L, 1)
        keep = pm if keep is None else keep & pm
    length, dtype = q.shape[-2], q.dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    q, k, v = q.to(work), k.to(work), v.to(work)
    if length == 0:
        return (q.sum(-1, keepdim=True) + k.sum(-1, keepdim=True)) * 0.0 * v
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    m = min(num_landmarks, length)
    keep = torch.ones(*q.shape[:-1], 1, dtype=torch.bool, device=q.device) if keep is None \
        else keep.expand(*q.shape[:-1], 1)  # (..., L, 1)
    q, k, v = (torch.where(keep, x, 0.0) for x in (q, k, v))  # hidden rows: zero, never NaN
    seg = torch.arange(length, device=q.device) * m // length  # (L,) segment of each position, contiguous
    w = keep.to(work)  # (..., L, 1)
    count = torch.zeros(*q.shape[:-2], m, 1, dtype=work, device=q.device).index_add(-2, seg, w)  # (..., m, 1)
    live = count > 0  # (..., m, 1) landmarks with a visible position
    ql = torch.zeros(*q.shape[:-2], m, q.shape[-1], dtype=work, device=q.device).index_add(-2, seg, q) \
        / count.clamp_min(1)  # (..., m, d) q~
    kl = torch.zeros(*k.shape[:-2], m, k.shape[-1], dtype=work, device=q.device).index_add(-2, seg, k) \
        / count.clamp_min(1)  # (..., m, d) k~
    k1 = _masked_softmax(q @ kl.transpose(-1, -2) * scale, live.transpose(-1, -2))  # (..., L, m)
    k2 = _masked_softmax(ql @ kl.transpose(-1, -2) * scale, live.transpose(-1, -2)) * live  # (..., m, m)
    k3 = _masked_softmax(ql @ k.transpose(-1, -2) * scale, keep.transpose(-1, -2)) * live  # (..., m, L)
    pinv = torch.linalg.pinv(k2) if pinv_iterations is None else newton_schulz_pinv(k2, pinv_iterations)
    out = k1 @ (pinv @ (k3 @ v))  # (..., L, dv)
    return out.to(dtype)
