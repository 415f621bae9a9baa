"""The forwards of band attention: out (N, Lq, dv) and the row log-sum-exp (N, Lq) for the backward.

- ``forward_native``: attnkit's native kernel (float32, dv % 16 == 0): tiles of 16 queries,
  each over the union of its rows' windows, no padded buffers.
- ``forward_fused``: torch's fused CPU attention kernel on the bands (CPU, float32 / float64, d == dv):
  each query block a "head" whose keys are a strided view of its band.
- ``forward_blocked``: blocked matmuls, also the reference the other two are tested against.
- ``forward_exact``: the blocked matmuls with hidden scores replaced (not added to) and values
  multiplied only where visible. The other two add masks, so a hidden NaN / inf that gets in comes out
  as NaN: a non-finite output is computed again by this one (the NaN / inf policy).
Rows with no key: out 0, lse +inf (so the backward gives P = 0).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ... import native
from ...policy import finite, visible_product
from .geometry import Geometry, band_view, bands, chunks, dirty_blocks, runs

__all__ = ["forward", "forward_native", "forward_fused", "forward_blocked", "forward_exact", "masked_scores"]

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu  # fused CPU kernel: (out, lse)
_MASK_ELEMS = 1 << 20  # mask elements per call on blocks that need their own mask


def masked_scores(g: Geometry, qb, kb, kbias, band, b0: int, b1: int) -> Tensor:
    """Masked scores of query blocks b0..b1-1: (N, n, bq, W) float32 (q already scaled)."""
    s = qb[:, b0:b1] @ bands(kb, b0, b1, g.m).transpose(-1, -2)  # (N, n, bq, W)
    s += band  # (bq, W)
    s += bands(kbias, b0, b1, g.m).reshape(kbias.shape[0], b1 - b0, 1, g.W)
    return s


def forward_blocked(g: Geometry, qb, kb, vb, kbias, band, want_lse: bool):
    """Band attention of every query block: out (N, nb, bq, dv) and, if asked, lse (N, nb, bq).

    Blocks whose band holds only real keys need one mask add; the others also add the key mask
    and handle rows with no key at all.
    """
    n_rows = qb.shape[0]
    out = qb.new_empty(n_rows, g.nb, g.bq, vb.shape[-1])  # (N, nb, bq, dv)
    lse = qb.new_empty(n_rows, g.nb, g.bq) if want_lse else None  # (N, nb, bq)
    dirty = dirty_blocks(g, kbias)
    for b0, b1 in chunks(g, n_rows):
        s = qb[:, b0:b1] @ bands(kb, b0, b1, g.m).transpose(-1, -2)  # (N, n, bq, W)
        s += band  # (bq, W)
        if any(dirty[b0:b1]):
            s += bands(kbias, b0, b1, g.m).reshape(kbias.shape[0], b1 - b0, 1, g.W)
            mx = s.amax(-1, keepdim=True)  # (N, n, bq, 1)
            empty = mx == float("-inf")
            has_empty = bool(empty.any())
            if has_empty:
                s.masked_fill_(empty, 0.0)  # harmless row, zeroed below
        else:
            mx, has_empty = (s.amax(-1, keepdim=True) if want_lse else None), False
        p = s.softmax(-1)  # (N, n, bq, W)
        if has_empty:
            p.masked_fill_(empty, 0.0)
        if want_lse:
            lse_c = mx - p.amax(-1, keepdim=True).log()  # max(p) = exp(mx - lse)
            if has_empty:
                lse_c.masked_fill_(empty, float("inf"))
            lse[:, b0:b1] = lse_c.squeeze(-1)
        torch.matmul(p, bands(vb, b0, b1, g.m), out=out[:, b0:b1])  # (N, n, bq, dv)
    return out, lse


def forward_exact(g: Geometry, qb, kb, vb, key_ok, band_ok):
    """``forward_blocked`` under the NaN / inf policy: out (N, nb, bq, dv), lse (N, nb, bq)."""
    n_rows = qb.shape[0]
    outs, lses = [], []
    for b0, b1 in chunks(g, n_rows):
        vis = band_ok & bands(key_ok, b0, b1, g.m).reshape(key_ok.shape[0], b1 - b0, 1, g.W)  # (N|1, n, bq, W)
        s = qb[:, b0:b1] @ bands(kb, b0, b1, g.m).transpose(-1, -2)  # (N, n, bq, W)
        s = s.masked_fill(~vis, float("-inf"))
        live = (s != float("-inf")).any(-1, keepdim=True)  # rows with a weight (NaN scores count)
        p = torch.where(live, s, 0.0).softmax(-1).masked_fill(~live, 0.0)
        outs.append(visible_product(p, bands(vb, b0, b1, g.m), vis))  # (N, n, bq, dv)
        lses.append(torch.where(live, s.logsumexp(-1, keepdim=True), float("inf")).squeeze(-1))
    if not outs:  # no query block (Lq = 0)
        return qb.new_empty(n_rows, 0, g.bq, vb.shape[-1]), qb.new_empty(n_rows, 0, g.bq)
    return torch.cat(outs, 1), torch.cat(lses, 1)


def forward_fused(g: Geometry, qb, kb, vb, kbias, band, scale: float):
    """What ``forward_blocked`` computes (with lse), from torch's fused CPU attention kernel.

    Blocks whose band holds only real keys share the one (bq, W) band mask. If few blocks touch a
    hidden key (the sequence's two ends), one call covers every block and those few are redone with
    their own mask; otherwise each run of blocks gets its own call. Rows with no key: out 0, lse +inf.
    """
    n_rows = qb.shape[0]
    band = band.to(qb.dtype)

    def call(b0, b1, dirty):  # -> out (N, n, bq, dv), lse (N, n, bq)
        mask = band  # (bq, W)
        if dirty:
            kb_bias = bands(kbias, b0, b1, g.m).reshape(kbias.shape[0], b1 - b0, 1, g.W)
            mask = band + kb_bias.to(qb.dtype)  # (N or 1, n, bq, W)
        o, lse_c = _flash(qb[:, b0:b1], band_view(kb, b0, b1, g), band_view(vb, b0, b1, g),
                          attn_mask=mask, scale=scale)
        if dirty:  # the kernel gives such rows out 0 and lse 0
            lse_c = lse_c.masked_fill((mask == float("-inf")).all(-1).expand_as(lse_c), float("inf"))
        return o, lse_c

    flags = dirty_blocks(g, kbias)
    todo = runs(flags)
    if 4 * sum(flags) <= len(flags):
        out, lse = call(0, g.nb, False)  # (N, nb, bq, dv), (N, nb, bq); wrong on the dirty blocks
        todo = [r for r in todo if r[0]]
    else:
        out = qb.new_empty(n_rows, g.nb, g.bq, vb.shape[-1])  # (N, nb, bq, dv)
        lse = qb.new_empty(n_rows, g.nb, g.bq)  # (N, nb, bq)
    for dirty, r0, r1 in todo:
        step = (r1 - r0) if not dirty else max(1, _MASK_ELEMS // (kbias.shape[0] * g.bq * g.W))
        for b0 in range(r0, r1, step):
            b1 = min(r1, b0 + step)
            out[:, b0:b1], lse[:, b0:b1] = call(b0, b1, dirty)
    return out, lse


def native_runs(q: Tensor, v: Tensor) -> bool:
    """Whether ``forward_native`` takes these inputs here."""
    return (q.dtype == torch.float32 and q.device.type == "cpu" and v.shape[-1] % 16 == 0 and v.shape[-1] > 0
            and native.kernel() is not None)


def forward_native(q, k, v, lengths, left: int, right: int, scale: float):
    """q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv) float32 -> out (N, Lq, dv), lse (N, Lq)."""
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))  # the kernel reads whole rows
    out, lse = native.kernel().window_forward(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1),
                                              native.lengths_arg(lengths), left, right, scale)
    return out.squeeze(1), lse.squeeze(1)  # (N, 1, Lq, dv), (N, 1, Lq) -> (N, Lq, dv), (N, Lq)


def forward(q, k, v, lengths, left: int, right: int, scale: float, want_lse: bool):
    """The forward that applies, first of: native, fused, blocked; exact when the output is not finite.
    q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv) -> out (N, Lq, dv), lse (N, Lq) or None."""
    if q.shape[0] == 0 or q.shape[1] == 0:  # nothing to compute (torch's fused kernel fails on empty sizes)
        return q.new_zeros(*q.shape[:2], v.shape[-1]), q.new_full(q.shape[:2], float("inf"))
    if native_runs(q, v):
        return forward_native(q, k, v, lengths, left, right, scale)
    fused = (q.device.type == "cpu" and q.dtype in (torch.float32, torch.float64)
             and v.shape[-1] == q.shape[-1])  # torch's fused CPU kernel: its limits
    g = Geometry(q.shape[1], k.shape[1], left, right, fused=fused)
    kb, vb = g.pad_keys(k), g.pad_keys(v)  # (N, nb + m - 1, bq, d | dv)
    kbias, band = g.key_bias(lengths, q.device), g.band_bias(q.device)
    if fused:
        out, lse = forward_fused(g, g.pad_queries(q), kb, vb, kbias, band, scale)
    else:
        out, lse = forward_blocked(g, g.pad_queries(q * scale), kb, vb, kbias, band, want_lse=want_lse)
    if not finite(out):  # the masks were added, so a hidden NaN / inf that got in is NaN here: exact instead
        out, lse = forward_exact(g, g.pad_queries(q * scale), kb, vb, g.key_ok(lengths, q.device),
                                 g.band_ok(q.device))
    return g.unpad_queries(out), (None if lse is None else g.unpad_queries(lse))  # (N, Lq, dv), (N, Lq)
