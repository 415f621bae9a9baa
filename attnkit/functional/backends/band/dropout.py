"""Band attention with dropout on the weights: the blocked band computation, differentiated by autograd
(memory O(L * W), still linear in L). Hidden scores are replaced, not added to, so it follows the
NaN / inf policy (``attnkit.functional.policy``) as it is."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ...policy import finite, visible_product
from .geometry import Geometry, bands, chunks

__all__ = ["band_dropout"]


def band_dropout(q, k, v, lengths, left: int, right: int, scale: float, dropout_p: float) -> Tensor:
    """q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv) -> (N, Lq, dv), dropout ``dropout_p`` on the weights."""
    g = Geometry(q.shape[1], k.shape[1], left, right)
    qb = g.pad_queries(q * scale)  # (N, nb, bq, d)
    kb, vb = g.pad_keys(k), g.pad_keys(v)  # (N, nb + m - 1, bq, d | dv)
    key_ok, band_ok = g.key_ok(lengths, q.device), g.band_ok(q.device)

    def blocks(exact: bool) -> Tensor:  # exact: values multiplied only where visible
        outs = []
        for b0, b1 in chunks(g, q.shape[0]):
            vis = band_ok & bands(key_ok, b0, b1, g.m).reshape(key_ok.shape[0], b1 - b0, 1, g.W)  # (N|1, n, bq, W)
            s = (qb[:, b0:b1] @ bands(kb, b0, b1, g.m).transpose(-1, -2)).masked_fill(~vis, float("-inf"))
            live = (s != float("-inf")).any(-1, keepdim=True)  # rows with a weight (NaN scores count)
            w = F.dropout(torch.where(live, s, 0.0).softmax(-1) * live, dropout_p)  # (N, n, bq, W); empty rows 0
            vband = bands(vb, b0, b1, g.m)  # (N, n, W, dv)
            outs.append(visible_product(w, vband, vis) if exact else w @ vband)  # (N, n, bq, dv)
        if not outs:
            return q.new_zeros(q.shape[0], 0, v.shape[-1])
        return g.unpad_queries(torch.cat(outs, dim=1))  # (N, Lq, dv)

    out = blocks(exact=False)
    return out if finite(out) else blocks(exact=True)  # not finite: perhaps 0 * a hidden NaN / inf
