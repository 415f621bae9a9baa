"""Memory-efficient exact attention: query/key tiles, online softmax, recomputing backward.

The scores are never held whole. For each query tile (``bq`` rows) the kernel walks the key tiles
(``bk`` columns) with the online softmax (running max ``m``, running sum ``l``, running output),
adding the bias tile ``Bias.block(...)`` computed on the spot. So an ALiBi or relative-position
bias costs O(bq * bk) memory instead of the (H, Lq, Lk) tensor SDPA needs. Tiles that a causal or
window mask hides entirely are skipped. The backward (a ``torch.autograd.Function``) keeps q, k, v,
out and the row log-sum-exp, and recomputes each tile; gradients reach learned bias tables
(``Bias.parameters()``) by differentiating each bias tile.

Masks: None, ``causal``, ``window``, ``padding`` and their ``&`` cheaply; any other mask is
materialised once as a bool (Lq, Lk) tensor and sliced (exact, but quadratic in memory).
NaN / inf: hidden scores are replaced (never added to); a row whose scores are all -inf gets zeros (no
weight), as SDPA gives it; an output that is not finite (perhaps 0 times a hidden NaN / inf value) is
computed again with each tile's product over its visible pairs only. No dropout (the online softmax has
no place for it) and no weights.
Internal layout: (B', H, L, d), B' = all leading dims but the head dim.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..bias import Bias, as_bias
from ..masks import Causal, Mask, Padding, Window, conjuncts, lengths_per_row
from ..policy import finite, visible_product
from . import Backend, register_backend

__all__ = ["chunked_attention"]

BLOCK_Q, BLOCK_K = 256, 512


class _Spec:
    """Mask structure for tiles: window (left, right) with causal folded in, padding, the rest dense."""

    def __init__(self, mask: Mask | None, lq: int, lk: int, ndim: int, lead: tuple[int, ...], device):
        self.lq, self.lk, self.off = lq, lk, lk - lq
        self.left = self.right = None
        self.lengths = None
        rest = []
        for part in conjuncts(mask):
            if isinstance(part, Window):
                self.left = part.left if self.left is None else min(self.left, part.left)
                self.right = part.right if self.right is None else min(self.right, part.right)
            elif isinstance(part, Causal):
                self.right = 0 if self.right is None else min(self.right, 0)
            elif isinstance(part, Padding):
                rows = lengths_per_row(part.lengths.to(device), lead, keep=1)
                self.lengths = rows if self.lengths is None else torch.minimum(self.lengths, rows)
            else:
                rest.append(part)
        self.dense = None
        for part in rest:  # quadratic fallback for masks without tile structure
            d = _fit(part.materialize(lq, lk, ndim, device), lead)
            self.dense = d if self.dense is None else self.dense & d

    def key_range(self, qs: int, qe: int) -> tuple[int, int]:
        """Keys [lo, hi) that queries [qs, qe) may see through the window / causal parts."""
        lo = 0 if self.left is None else max(0, qs + self.off - self.left)
        hi = self.lk if self.right is None else min(self.lk, qe - 1 + self.off + self.right + 1)
        return lo, hi

    def tile(self, qs, qe, ks, ke, device) -> Tensor | None:
        """Bool tile broadcastable to (B', H, bq, bk), or None when everything is allowed."""
        ok = None
        if self.left is not None or self.right is not None:
            i = torch.arange(qs, qe, device=device).unsqueeze(1) + self.off  # (bq, 1)
            j = torch.arange(ks, ke, device=device).unsqueeze(0)  # (1, bk)
            ok = torch.ones(qe - qs, ke - ks, dtype=torch.bool, device=device)
            if self.left is not None:
                ok &= j >= i - self.left
            if self.right is not None:
                ok &= j <= i + self.right
        if self.lengths is not None:
            keep = torch.arange(ks, ke, device=device) < self.lengths.view(-1, 1, 1, 1)  # (B', 1, 1, bk)
            ok = keep if ok is None else ok & keep
        if self.dense is not None:
            d = self.dense[..., qs:qe, ks:ke]
            ok = d if ok is None else ok & d
        return ok


def _fit(t: Tensor, lead: tuple[int, ...]) -> Tensor:
    """A tensor broadcastable to (*lead, a, b) -> broadcastable to the (B', H, a, b) view."""
    if len(lead) == 1 and t.dim() == 3:  # (B | 1, a, b) for (B, L, d) inputs: H = 1
        return t.unsqueeze(1)
    if t.dim() <= 3 or len(lead) <= 2:
        return t if t.dim() <= 4 else t.reshape(t.shape[-4:])
    t = t.expand(*lead, *t.shape[-2:])  # more leading dims than the view: flatten them
    return t.reshape(math.prod(lead[:-1]), lead[-1], *t.shape[-2:])


def _bias_tile(bias: Bias | None, lead, qs, qe, ks, ke, lq, lk, device, dtype) -> Tensor | None:
    if bias is None:
        return None
    return _fit(bias.block(qs, qe, ks, ke, lq, lk, device, dtype), lead)


def _tile_scores(q, k, qs, qe, ks, ke, ok, bias, lead, spec):
    """Masked scores (B', H, bq, bk) (q already scaled); -inf where hidden (``ok`` False)."""
    s = q[:, :, qs:qe] @ k[:, :, ks:ke].transpose(-1, -2)  # (B', H, bq, bk)
    b = _bias_tile(bias, lead, qs, qe, ks, ke, spec.lq, spec.lk, q.device, q.dtype)
    if b is not None:
        s += b
    if ok is not None:
        s.masked_fill_(~ok, float("-inf"))
    return s


class _ChunkedFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, spec, bias, lead, scale, exact, *params):
        # q (B', H, Lq, d), k (B', H, Lk, d), v (B', H, Lk, dv) float32; exact: multiply visible pairs only
        lq, lk = q.shape[2], k.shape[2]
        qs_ = q * scale
        out = q.new_zeros(*q.shape[:3], v.shape[-1])  # (B', H, Lq, dv)
        lse = q.new_full(q.shape[:3], float("inf"))  # (B', H, Lq); +inf: rows with no key
        for qs in range(0, lq, BLOCK_Q):
            qe = min(lq, qs + BLOCK_Q)
            lo, hi = spec.key_range(qs, qe)
            m = q.new_full((*q.shape[:2], qe - qs, 1), float("-inf"))  # running max (B', H, bq, 1)
            l = q.new_zeros(m.shape)  # running sum
            acc = out[:, :, qs:qe]  # running output (B', H, bq, dv), a view into out
            for ks in range(lo - lo % BLOCK_K, hi, BLOCK_K):
                ke = min(lk, ks + BLOCK_K)
                ok = spec.tile(qs, qe, ks, ke, q.device)  # bool, broadcastable to (B', H, bq, bk), or None
                s = _tile_scores(qs_, k, qs, qe, ks, ke, ok, bias, lead, spec)  # (B', H, bq, bk)
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))
                m_safe = torch.where(m_new == float("-inf"), 0.0, m_new)
                s -= m_safe
                p = s.exp_()  # (B', H, bq, bk)
                alpha = (m - m_safe).exp()  # (B', H, bq, 1); 0 while m = -inf
                l.mul_(alpha).add_(p.sum(-1, keepdim=True))
                acc.mul_(alpha).add_(visible_product(p, v[:, :, ks:ke], ok) if exact else p @ v[:, :, ks:ke])
                m = m_new
            acc /= l.clamp_min(1e-30)
            m_safe = torch.where(m == float("-inf"), 0.0, m)
            lse[:, :, qs:qe] = torch.where(l > 0, m_safe + l.clamp_min(1e-30).log(), float("inf")).squeeze(-1)
        ctx.save_for_backward(q, k, v, out, lse, *params)
        ctx.conf = (spec, bias, lead, scale, len(params))
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, *params = ctx.saved_tensors
        spec, bias, lead, scale, _ = ctx.conf
        lq, lk = q.shape[2], k.shape[2]
        qs_ = q * scale
        leaves = tuple(p.detach().requires_grad_() for p in params)
        rebound = bias.rebind(leaves) if leaves else bias
        dparams = [torch.zeros_like(p) for p in params]
        delta = (dout * out).sum(-1, keepdim=True)  # (B', H, Lq, 1)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for qs in range(0, lq, BLOCK_Q):
            qe = min(lq, qs + BLOCK_Q)
            lo, hi = spec.key_range(qs, qe)
            do = dout[:, :, qs:qe]  # (B', H, bq, dv)
            for ks in range(lo - lo % BLOCK_K, hi, BLOCK_K):
                ke = min(lk, ks + BLOCK_K)
                ok = spec.tile(qs, qe, ks, ke, q.device)
                s = _tile_scores(qs_, k, qs, qe, ks, ke, ok, bias, lead, spec)  # (B', H, bq, bk)
                p = (s - lse[:, :, qs:qe].unsqueeze(-1)).exp_()  # P (B', H, bq, bk)
                ds = do @ v[:, :, ks:ke].transpose(-1, -2)  # dP
                ds -= delta[:, :, qs:qe]
                ds *= p  # dS = P * (dP - delta): gradient of the biased, scaled scores
                dq[:, :, qs:qe] += ds @ k[:, :, ks:ke]
                dk[:, :, ks:ke] += ds.transpose(-1, -2) @ qs_[:, :, qs:qe]
                dv[:, :, ks:ke] += p.transpose(-1, -2) @ do
                if leaves:
                    with torch.enable_grad():
                        tile = _bias_tile(rebound, lead, qs, qe, ks, ke, lq, lk, q.device, q.dtype)
                        grads = torch.autograd.grad(tile, leaves, ds.sum_to_size(tile.shape), allow_unused=True)
                    for acc, g in zip(dparams, grads):
                        if g is not None:
                            acc += g
        return (dq * scale, dk, dv, None, None, None, None, None, *dparams)


def chunked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float,
                      dropout_p: float, need_weights: bool) -> tuple[Tensor, None]:
    """Backend "chunked": q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    lead, lq, lk = tuple(q.shape[:-2]), q.shape[-2], k.shape[-2]
    heads = lead[-1] if len(lead) >= 2 else 1
    rows = math.prod(lead[:-1]) if len(lead) >= 2 else math.prod(lead)  # B'
    dtype = q.dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    q4 = q.reshape(rows, heads, lq, q.shape[-1]).to(work)  # (B', H, Lq, d)
    k4 = k.reshape(rows, heads, lk, k.shape[-1]).to(work)  # (B', H, Lk, d)
    v4 = v.reshape(rows, heads, lk, v.shape[-1]).to(work)  # (B', H, Lk, dv)
    spec = _Spec(mask, lq, lk, q.dim(), lead, q.device)
    b = as_bias(bias)
    params = b.parameters() if b is not None else ()
    out = _ChunkedFn.apply(q4, k4, v4, spec, b, lead, scale, False, *params)  # (B', H, Lq, dv)
    if not finite(out):  # perhaps 0 * a hidden NaN / inf value: each tile's visible pairs only
        out = _ChunkedFn.apply(q4, k4, v4, spec, b, lead, scale, True, *params)
    return out.to(dtype).reshape(*lead, lq, v.shape[-1]), None


register_backend(Backend(
    "chunked", chunked_attention, "query / key tiles with an online softmax; a structured bias computed per tile",
    dropout=False, masks="any (causal, window, padding cheaply; others as a dense mask)"))
