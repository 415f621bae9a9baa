"""APPROXIMATE linear attention (Katharopoulos et al. 2020, "Transformers are RNNs").

**Not softmax attention.** The softmax kernel exp(q . k / sqrt(d)) is replaced by the feature map
phi(x) = elu(x) + 1, so

    out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j) + eps)

costs O(L * d * dv) instead of O(L^2 * d). The results differ from every exact backend; the
backend is registered as "linear_approx" with ``exact=False`` and is never picked automatically
(only ``attention(..., backend="linear_approx")``). ``scale`` is ignored (phi replaces it).

Masks: None, ``causal()`` (needs Lq == Lk; computed in chunks of ``CHUNK`` rows: exact within a
chunk, running sums across chunks), ``padding(lengths)`` (padded keys get phi = 0), and their ``&``.
A query with no visible key gets zeros. No dropout, no weights, no bias. Hidden keys never enter (their
feature maps and values are replaced by 0, later keys of a causal chunk are multiplied in only where
visible), so a NaN / inf there does not reach the output; a visible one does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..masks import Causal, Mask, Padding, conjuncts
from ..policy import visible_product
from . import Backend, Call, register_backend

__all__ = ["linear_attention_approx", "elu_feature_map"]

CHUNK = 64
EPS = 1e-6


def elu_feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1 > 0, the paper's feature map."""
    return F.elu(x) + 1.0


def _noncausal(fq: Tensor, fk: Tensor, v: Tensor) -> Tensor:
    """fq (..., Lq, d), fk (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    kv = fk.transpose(-1, -2) @ v  # (..., d, dv)
    z = fk.sum(-2, keepdim=True)  # (..., 1, d)
    den = (fq * z).sum(-1, keepdim=True)  # (..., Lq, 1)
    return (fq @ kv) / (den + EPS)


def _causal(fq: Tensor, fk: Tensor, v: Tensor) -> Tensor:
    """Causal linear attention, chunked: fq, fk (..., L, d), v (..., L, dv) -> (..., L, dv)."""
    lead, length, d, dv = fq.shape[:-2], fq.shape[-2], fq.shape[-1], v.shape[-1]
    nc = -(-length // CHUNK)
    pad = nc * CHUNK - length
    fq, fk, v = (F.pad(t, (0, 0, 0, pad)) for t in (fq, fk, v))  # zero rows: no contribution
    qc = fq.reshape(*lead, nc, CHUNK, d)  # (..., nc, C, d)
    kc = fk.reshape(*lead, nc, CHUNK, d)  # (..., nc, C, d)
    vc = v.reshape(*lead, nc, CHUNK, dv)  # (..., nc, C, dv)
    kv = kc.transpose(-1, -2) @ vc  # (..., nc, d, dv) per chunk
    ks = kc.sum(-2)  # (..., nc, d)
    state = torch.cat((torch.zeros_like(kv[..., :1, :, :]), kv.cumsum(-3)[..., :-1, :, :]), -3)  # before chunk
    zsum = torch.cat((torch.zeros_like(ks[..., :1, :]), ks.cumsum(-2)[..., :-1, :]), -2)  # (..., nc, d)
    tril = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=fq.device).tril()
    intra = (qc @ kc.transpose(-1, -2)).masked_fill(~tril, 0.0)  # (..., nc, C, C)
    num = qc @ state + visible_product(intra, vc, tril)  # (..., nc, C, dv); later keys never enter
    den = (qc * zsum.unsqueeze(-2)).sum(-1, keepdim=True) + intra.sum(-1, keepdim=True)  # (..., nc, C, 1)
    out = (num / (den + EPS)).reshape(*lead, nc * CHUNK, dv)  # (..., L_padded, dv)
    return out[..., :length, :]


def _parts(mask: Mask | None) -> tuple[bool, list[Padding]] | None:
    """(causal, paddings) of ``causal [& padding]``; None for any other mask."""
    causal, pads = False, []
    for part in conjuncts(mask):
        if isinstance(part, Causal):
            causal = True
        elif isinstance(part, Padding):
            pads.append(part)
        else:
            return None
    return causal, pads


def refuse(c: Call) -> str | None:
    parts = _parts(c.mask)
    if parts is None:
        return f"backend 'linear_approx' supports masks causal() and padding() only, got {c.mask!r}"
    if parts[0] and c.q.shape[-2] != c.k.shape[-2]:
        return (f"backend 'linear_approx': causal needs Lq == Lk, got q {tuple(c.q.shape)}, "
                f"k {tuple(c.k.shape)}")
    return None


def linear_attention_approx(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float,
                            dropout_p: float, need_weights: bool) -> tuple[Tensor, None]:
    """Backend "linear_approx" (APPROXIMATE): q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    causal, pads = _parts(mask)
    keep = None
    for part in pads:
        pm = part.materialize(1, k.shape[-2], q.dim(), q.device).transpose(-1, -2)  # (B, 1.., Lk, 1)
        keep = pm if keep is None else keep & pm
    dtype = q.dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    fq, fk = elu_feature_map(q.to(work)), elu_feature_map(k.to(work))  # (..., L, d), > 0
    vw = v.to(work)
    if keep is not None:  # padded keys: phi = 0 and v = 0, replaced (NaN / inf there never enter)
        fk, vw = torch.where(keep, fk, 0.0), torch.where(keep, vw, 0.0)  # broadcasts the batch dim of q
        fq = fq.expand(*fk.shape[:-2], *fq.shape[-2:])
    out = _causal(fq, fk, vw) if causal else _noncausal(fq, fk, vw)
    if keep is not None:  # a query with no key outputs zeros, whatever its q holds
        out = torch.where(keep.any(-2, keepdim=True), out, 0.0)  # (B, 1.., 1, 1): a length above 0
    return out.to(dtype), None


register_backend(Backend(
    "linear_approx", linear_attention_approx, "APPROXIMATE: elu(x) + 1 feature maps instead of softmax, O(L d dv)",
    exact=False, dropout=False, bias=False, masks="none, causal (Lq == Lk), padding", refuse=refuse))
