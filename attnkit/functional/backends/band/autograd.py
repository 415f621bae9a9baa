"""Band attention as a ``torch.autograd.Function``: the forward keeps only out and the row log-sum-exp,
the backward recomputes the scores (flash-attention style), so memory is O(L * d) saved plus one chunk
of scores at a time: the native kernel's ``window_backward`` for float32 with d and dv multiples of 16
where it runs (every CPU with a compiler), otherwise blocked matmuls in chunks."""

from __future__ import annotations

import torch

from ... import native
from .forward import forward, masked_scores, native_runs
from .geometry import Geometry, bands, chunks

__all__ = ["BandFn"]


def _backward_blocked(q, k, v, out, lse, lengths, dout, left: int, right: int, scale: float):
    """(dq, dk, dv) for q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv), out / dout (N, Lq, dv), lse (N, Lq)."""
    g = Geometry(q.shape[1], k.shape[1], left, right)
    qb = g.pad_queries(q * scale)  # (N, nb, bq, d)
    kb, vb = g.pad_keys(k), g.pad_keys(v)  # (N, nb + m - 1, bq, d | dv)
    kbias, band = g.key_bias(lengths, q.device), g.band_bias(q.device)
    lse = g.pad_queries(lse.unsqueeze(-1)).squeeze(-1)  # (N, Lq) -> (N, nb, bq); padded rows get 0
    dout = dout.contiguous()
    delta = g.pad_queries((dout * out).sum(-1, keepdim=True))  # (N, nb, bq, 1)
    dob = g.pad_queries(dout)  # (N, nb, bq, dv)
    dq = torch.empty_like(qb)  # (N, nb, bq, d)
    dkb, dvb = torch.zeros_like(kb), torch.zeros_like(vb)  # (N, nb + m - 1, bq, d | dv)
    for b0, b1 in chunks(g, q.shape[0]):
        n = b1 - b0
        s = masked_scores(g, qb, kb, kbias, band, b0, b1)  # (N, n, bq, W)
        p = (s - lse[:, b0:b1].unsqueeze(-1)).exp_()  # P (N, n, bq, W)
        kc, vc = bands(kb, b0, b1, g.m), bands(vb, b0, b1, g.m)  # (N, n, W, d | dv)
        ds = dob[:, b0:b1] @ vc.transpose(-1, -2)  # dP (N, n, bq, W)
        ds -= delta[:, b0:b1]
        ds *= p  # dS = P * (dP - delta)
        dq[:, b0:b1] = ds @ kc
        dk_band = ds.transpose(-1, -2) @ qb[:, b0:b1]  # (N, n, W, d)
        dv_band = p.transpose(-1, -2) @ dob[:, b0:b1]  # (N, n, W, dv)
        for sgm in range(g.m):  # band segment sgm of block b is key block b + sgm
            rows = slice(sgm * g.bq, (sgm + 1) * g.bq)
            dkb[:, b0 + sgm:b0 + sgm + n] += dk_band[:, :, rows]
            dvb[:, b0 + sgm:b0 + sgm + n] += dv_band[:, :, rows]
    return g.unpad_queries(dq) * scale, g.unpad_keys(dkb), g.unpad_keys(dvb)  # (N, Lq, d), (N, Lk, d | dv)


class BandFn(torch.autograd.Function):
    """q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv) float32 / float64; lengths (N,) or None -> out (N, Lq, dv)."""

    @staticmethod
    def forward(ctx, q, k, v, lengths, left, right, scale):
        out, lse = forward(q, k, v, lengths, left, right, scale, want_lse=any(ctx.needs_input_grad[:3]))
        ctx.save_for_backward(q, k, v, out, lse, lengths)
        ctx.conf = (left, right, scale)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, lengths = ctx.saved_tensors
        left, right, scale = ctx.conf
        if native_runs(q, v) and q.shape[-1] % 16 == 0:
            dq, dk, dv = native.kernel().window_backward(q.contiguous(), k.contiguous(), v.contiguous(),
                                                         out.contiguous(), dout.contiguous(), lse.contiguous(),
                                                         native.lengths_arg(lengths), left, right, scale)
        else:
            dq, dk, dv = _backward_blocked(q, k, v, out, lse, lengths, dout, left, right, scale)
        return dq, dk, dv, None, None, None, None
