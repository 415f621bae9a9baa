"""Local (truncated / sliding-window) attention in O(L * window) time and memory.

Queries are cut into blocks of ``bq`` rows. Query block ``b`` can only see the keys
``[b*bq + off - left, b*bq + off + bq - 1 + right]`` (``off = Lk - Lq``, queries aligned to the end
of the keys), a band of ``m`` key blocks, ``W = m * bq`` keys wide. The keys are copied once into a
zero-padded buffer cut into blocks of ``bq`` rows, so block ``b``'s band is the key blocks
``b .. b + m - 1``. Scores are (..., n_blocks, bq, W): never (Lq, Lk).

Inside the band, the window is one constant (bq, W) pattern (row r sees columns r .. r + left + right);
keys outside [0, Lk), past a padding length, or (causal) after the query are masked per column.

Forward and backward are a ``torch.autograd.Function``: the forward keeps only out and the row
log-sum-exp. Three forwards, the first that applies:

- float32 on an AVX-512 CPU with dv % 16 == 0: attnkit's native kernel (``native.window_kernel``,
  ``csrc/window_attention.cpp``): tiles of 16 queries, each over the union of its rows' windows
  (at most 15 keys more than a row needs), no padded buffers.
- float32/float64 with d == dv: torch's fused CPU attention kernel on the bands (``_forward_fused``:
  each query block a "head" whose keys are a strided view of its band).
- otherwise the blocked matmul path (``_forward``), also the reference the other two are tested against.

The backward recomputes the scores (flash-attention style), so memory is O(L * d) saved plus one
chunk of scores at a time: the native kernel's ``window_backward`` for float32 with d and dv
multiples of 16 on AVX-512, otherwise the blocked matmul path in chunks.
bfloat16/float16 inputs are computed in float32 and cast back. ``dropout_p > 0`` uses a plain
differentiable version of the same band computation (memory O(L * W), still linear in L).

Supported masks: ``window`` alone or ``&``-combined with ``causal`` and ``padding``.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor

from ..masks import Causal, Mask, Padding, Window, conjuncts
from . import Backend, register_backend
from .native import lengths_arg, window_kernel

__all__ = ["local_attention", "band_attention", "window_parts"]

_CHUNK_ELEMS = 1 << 17  # scores per chunk (N * n * bq * W): 512 KB in float32, stays in cache


def window_parts(mask: Mask | None, require_window: bool = True) -> tuple[int, int, Tensor | None] | None:
    """Read (left, right, lengths) from ``window [& causal] [& padding]``; None if not that form.
    With ``require_window=False`` the window may be absent (then left / right are None, right 0 if causal)."""
    left = right = None
    lengths = None
    causal = False
    for part in conjuncts(mask):
        if isinstance(part, Window):
            left = part.left if left is None else min(left, part.left)
            right = part.right if right is None else min(right, part.right)
        elif isinstance(part, Causal):
            causal = True
        elif isinstance(part, Padding):
            lengths = part.lengths if lengths is None else torch.minimum(lengths, part.lengths)
        else:
            return None
    if left is None and require_window:
        return None
    return left, (0 if causal else right), lengths


class _Geometry:
    """Block layout for Lq queries, Lk keys and a window (left, right)."""

    def __init__(self, lq: int, lk: int, left: int, right: int, bq: int | None = None, fused: bool = False):
        self.lq, self.lk = lq, lk
        left, right = min(left, lq + lk), min(right, lq + lk)  # wider windows change nothing
        self.left, self.right = left, right
        self.bq = bq or _block_size(left + right + 1, fused)
        self.nb = -(-lq // self.bq)  # query blocks
        self.m = -(-(self.bq + left + right) // self.bq)  # key blocks per band
        self.W = self.m * self.bq  # band width
        self.start = (lk - lq) - left  # key index of column 0 of block 0's band (may be < 0)
        self.lp = (self.nb + self.m - 1) * self.bq  # padded key length
        self.lo = min(max(self.start, 0), lk)  # the real keys [lo, hi) that land in the buffer
        self.hi = min(max(self.start + self.lp, 0), lk)

    def pad_keys(self, k: Tensor) -> Tensor:
        """k (N, Lk, d) -> (N, nb + m - 1, bq, d), zero rows outside [0, Lk)."""
        a, b = self.lo - self.start, self.hi - self.start  # where the real keys land
        buf = k.new_empty(k.shape[0], self.lp, k.shape[-1])  # (N, Lp, d)
        buf[:, :a].zero_()
        buf[:, a:b] = k[:, self.lo:self.hi]
        buf[:, b:].zero_()
        return buf.view(k.shape[0], self.nb + self.m - 1, self.bq, k.shape[-1])

    def unpad_keys(self, buf: Tensor) -> Tensor:
        """(N, nb + m - 1, bq, d) gradient buffer -> (N, Lk, d)."""
        n, d = buf.shape[0], buf.shape[-1]
        out = buf.new_zeros(n, self.lk, d)
        out[:, self.lo:self.hi] = buf.reshape(n, self.lp, d)[:, self.lo - self.start:self.hi - self.start]
        return out

    def pad_queries(self, x: Tensor) -> Tensor:
        """x (N, Lq, e) -> (N, nb, bq, e), zero rows past Lq."""
        if self.nb * self.bq != self.lq:
            x = F.pad(x, (0, 0, 0, self.nb * self.bq - self.lq))  # (N, nb * bq, e)
        return x.view(x.shape[0], self.nb, self.bq, x.shape[-1])

    def key_bias(self, lengths: Tensor | None, device) -> Tensor:
        """Additive 0 / -inf per padded key column: (N or 1, nb + m - 1, 1, bq) float32."""
        j = self.start + torch.arange(self.lp, device=device)  # (Lp,) real key index
        ok = ((j >= 0) & (j < self.lk)).unsqueeze(0)  # (1, Lp)
        if lengths is not None:
            ok = ok & (j.unsqueeze(0) < lengths.to(device).unsqueeze(1))  # (N, Lp)
        bias = torch.zeros(ok.shape, device=device).masked_fill_(~ok, float("-inf"))
        return bias.view(ok.shape[0], self.nb + self.m - 1, 1, self.bq)

    def band_bias(self, device) -> Tensor:
        """Additive 0 / -inf (bq, W): row r sees band columns r .. r + left + right."""
        r = torch.arange(self.bq, device=device).unsqueeze(1)  # (bq, 1)
        c = torch.arange(self.W, device=device).unsqueeze(0)  # (1, W)
        ok = (c >= r) & (c <= r + self.left + self.right)
        return torch.zeros(ok.shape, device=device).masked_fill_(~ok, float("-inf"))


def _block_size(band: int, fused: bool = False) -> int:
    """Query block rows: small tiles waste less of the band, large tiles run faster GEMMs.
    Blocked matmuls (measured on 2 AVX-512 cores): 64 beat 32 and 128 for a 257-wide window.
    Fused kernel: it cuts queries into tiles of 32 anyway, so 32 (16 for narrow bands) wastes least."""
    if fused:
        return 16 if band <= 32 else 32
    return 32 if band <= 32 else 64 if band <= 512 else 128


def _bands(x: Tensor, b0: int, b1: int, m: int) -> Tensor:
    """Blocks (N, nb + m - 1, bq, e) -> bands of blocks b0..b1-1: (N, b1 - b0, m * bq, e)."""
    return torch.cat([x[:, b0 + s:b1 + s] for s in range(m)], dim=2)


def _chunks(g: _Geometry, n_rows: int):
    step = max(1, _CHUNK_ELEMS // max(1, n_rows * g.bq * g.W))
    for b0 in range(0, g.nb, step):
        yield b0, min(g.nb, b0 + step)


def _scores(g, qb, kb, kbias, band, b0, b1):
    """Masked scores of query blocks b0..b1-1: (N, n, bq, W) float32 (q already scaled)."""
    s = qb[:, b0:b1] @ _bands(kb, b0, b1, g.m).transpose(-1, -2)  # (N, n, bq, W)
    s += band  # (bq, W)
    s += _bands(kbias, b0, b1, g.m).reshape(kbias.shape[0], b1 - b0, 1, g.W)
    return s


def _dirty_blocks(g: _Geometry, kbias: Tensor) -> list[bool]:
    """Per query block: does its band touch a hidden key (edge of the sequence or padding)?"""
    bad = (kbias == float("-inf")).flatten(2).any(-1).any(0).long()  # (nb + m - 1,) blocks with a hidden key
    csum = torch.cat((bad.new_zeros(1), bad.cumsum(0)))  # (nb + m,)
    return ((csum[g.m:g.m + g.nb] - csum[:g.nb]) > 0).tolist()  # any hidden key in blocks b .. b + m - 1


def _forward(g: _Geometry, qb, kb, vb, kbias, band, want_lse: bool):
    """Band attention of every query block: out (N, nb, bq, dv) and, if asked, lse (N, nb, bq).

    Blocks whose band holds only real keys need one mask add; the others also add the key mask
    and handle rows with no key at all (output 0, lse = +inf so the backward gives P = 0).
    """
    n_rows = qb.shape[0]
    out = qb.new_empty(n_rows, g.nb, g.bq, vb.shape[-1])  # (N, nb, bq, dv)
    lse = qb.new_empty(n_rows, g.nb, g.bq) if want_lse else None  # (N, nb, bq)
    dirty = _dirty_blocks(g, kbias)
    for b0, b1 in _chunks(g, n_rows):
        s = qb[:, b0:b1] @ _bands(kb, b0, b1, g.m).transpose(-1, -2)  # (N, n, bq, W)
        s += band  # (bq, W)
        if any(dirty[b0:b1]):
            s += _bands(kbias, b0, b1, g.m).reshape(kbias.shape[0], b1 - b0, 1, g.W)
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
        torch.matmul(p, _bands(vb, b0, b1, g.m), out=out[:, b0:b1])  # (N, n, bq, dv)
    return out, lse


_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu  # fused CPU kernel: (out, lse)
_MASK_ELEMS = 1 << 20  # mask elements per call on blocks that need their own mask


def _band_view(x: Tensor, b0: int, b1: int, g: _Geometry) -> Tensor:
    """Blocks (N, nb + m - 1, bq, e) -> overlapping bands of blocks b0..b1-1, no copy: (N, b1 - b0, W, e)."""
    n, e = x.shape[0], x.shape[-1]
    return x.as_strided((n, b1 - b0, g.W, e), (x.stride(0), g.bq * e, e, 1), x.storage_offset() + b0 * g.bq * e)


def _runs(flags: list[bool]) -> list[tuple[bool, int, int]]:
    """Maximal runs of equal flags: [(flag, start, stop), ...]."""
    runs, start = [], 0
    for flag, group in itertools.groupby(flags):
        stop = start + len(list(group))
        runs.append((flag, start, stop))
        start = stop
    return runs


def _forward_fused(g: _Geometry, qb, kb, vb, kbias, band, scale: float):
    """What ``_forward`` computes (with lse), from torch's fused CPU attention kernel: each query block
    is one "head" whose keys are its band (a strided view, no copy).

    Blocks whose band holds only real keys share the one (bq, W) band mask. If few blocks touch a
    hidden key (the sequence's two ends), one call covers every block and those few are redone with
    their own mask; otherwise each run of blocks gets its own call. Rows with no key: out 0, lse +inf.
    """
    n_rows = qb.shape[0]
    band = band.to(qb.dtype)

    def call(b0, b1, dirty):  # -> out (N, n, bq, dv), lse (N, n, bq)
        mask = band  # (bq, W)
        if dirty:
            kb_bias = _bands(kbias, b0, b1, g.m).reshape(kbias.shape[0], b1 - b0, 1, g.W)
            mask = band + kb_bias.to(qb.dtype)  # (N or 1, n, bq, W)
        o, lse_c = _flash(qb[:, b0:b1], _band_view(kb, b0, b1, g), _band_view(vb, b0, b1, g),
                          attn_mask=mask, scale=scale)
        if dirty:  # the kernel gives such rows out 0 and lse 0
            lse_c = lse_c.masked_fill((mask == float("-inf")).all(-1).expand_as(lse_c), float("inf"))
        return o, lse_c

    flags = _dirty_blocks(g, kbias)
    runs = _runs(flags)
    if 4 * sum(flags) <= len(flags):
        out, lse = call(0, g.nb, False)  # (N, nb, bq, dv), (N, nb, bq); wrong on the dirty blocks
        runs = [r for r in runs if r[0]]
    else:
        out = qb.new_empty(n_rows, g.nb, g.bq, vb.shape[-1])  # (N, nb, bq, dv)
        lse = qb.new_empty(n_rows, g.nb, g.bq)  # (N, nb, bq)
    for dirty, r0, r1 in runs:
        step = (r1 - r0) if not dirty else max(1, _MASK_ELEMS // (kbias.shape[0] * g.bq * g.W))
        for b0 in range(r0, r1, step):
            b1 = min(r1, b0 + step)
            out[:, b0:b1], lse[:, b0:b1] = call(b0, b1, dirty)
    return out, lse


def _native_applies(q: Tensor, v: Tensor) -> bool:
    return q.dtype == torch.float32 and q.device.type == "cpu" and v.shape[-1] % 16 == 0 and v.shape[-1] > 0


def _forward_native(q, k, v, lengths, left: int, right: int, scale: float):
    """The native kernel: q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv) float32 -> out (N, Lq, dv), lse (N, Lq)."""
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))  # the kernel reads whole rows
    out, lse = window_kernel().window_forward(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), lengths_arg(lengths),
                                              left, right, scale)  # (N, 1, Lq, dv), (N, 1, Lq)
    return out.squeeze(1), lse.squeeze(1)


def _forward_blocked(q, k, v, lengths, left: int, right: int, scale: float, want_lse: bool):
    """The PyTorch forwards (fused kernel on bands, or blocked matmuls): out (N, Lq, dv), lse (N, Lq) or None."""
    fused = q.dtype in (torch.float32, torch.float64) and v.shape[-1] == q.shape[-1]  # the kernel's limits
    g = _Geometry(q.shape[1], k.shape[1], left, right, fused=fused)
    kb, vb = g.pad_keys(k), g.pad_keys(v)  # (N, nb + m - 1, bq, d | dv)
    kbias, band = g.key_bias(lengths, q.device), g.band_bias(q.device)
    if fused:
        out, lse = _forward_fused(g, g.pad_queries(q), kb, vb, kbias, band, scale)
    else:
        out, lse = _forward(g, g.pad_queries(q * scale), kb, vb, kbias, band, want_lse=want_lse)
    out = out.reshape(q.shape[0], g.nb * g.bq, -1)[:, :g.lq]  # (N, nb, bq, dv) -> (N, Lq, dv)
    if lse is not None:
        lse = lse.reshape(q.shape[0], g.nb * g.bq)[:, :g.lq]  # (N, Lq): the backward may block differently
    return out, lse


class _LocalFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, lengths, left, right, scale):
        # q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv), float32; lengths (N,) or None
        if _native_applies(q, v) and window_kernel() is not None:
            out, lse = _forward_native(q, k, v, lengths, left, right, scale)  # (N, Lq, dv), (N, Lq)
        else:
            out, lse = _forward_blocked(q, k, v, lengths, left, right, scale, any(ctx.needs_input_grad[:3]))
        ctx.save_for_backward(q, k, v, out, lse, lengths)
        ctx.conf = (left, right, scale)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, lengths = ctx.saved_tensors
        left, right, scale = ctx.conf
        if _native_applies(q, v) and q.shape[-1] % 16 == 0 and window_kernel() is not None:
            dq, dk, dv = window_kernel().window_backward(q.contiguous(), k.contiguous(), v.contiguous(),
                                                         out.contiguous(), dout.contiguous(), lse.contiguous(),
                                                         lengths_arg(lengths), left, right, scale)
            return dq, dk, dv, None, None, None, None
        g = _Geometry(q.shape[1], k.shape[1], left, right)
        qb = g.pad_queries(q * scale)  # (N, nb, bq, d)
        kb, vb = g.pad_keys(k), g.pad_keys(v)  # (N, nb + m - 1, bq, d | dv)
        kbias, band = g.key_bias(lengths, q.device), g.band_bias(q.device)
        lse = g.pad_queries(lse.unsqueeze(-1)).squeeze(-1)  # (N, Lq) -> (N, nb, bq); padded rows get 0
        dout = dout.contiguous()
        delta = g.pad_queries((dout * out).sum(-1, keepdim=True))  # (N, nb, bq, 1)
        dob = g.pad_queries(dout)  # (N, nb, bq, dv)
        dq = torch.empty_like(qb)  # (N, nb, bq, d)
        dkb, dvb = torch.zeros_like(kb), torch.zeros_like(vb)  # (N, nb + m - 1, bq, d | dv)
        for b0, b1 in _chunks(g, q.shape[0]):
            n = b1 - b0
            s = _scores(g, qb, kb, kbias, band, b0, b1)  # (N, n, bq, W)
            p = (s - lse[:, b0:b1].unsqueeze(-1)).exp_()  # P (N, n, bq, W)
            kc, vc = _bands(kb, b0, b1, g.m), _bands(vb, b0, b1, g.m)  # (N, n, W, d | dv)
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
        dq = dq.view(q.shape[0], g.nb * g.bq, -1)[:, :g.lq] * scale  # (N, Lq, d)
        return dq, g.unpad_keys(dkb), g.unpad_keys(dvb), None, None, None, None


def _local_dropout(q, k, v, lengths, left, right, scale, dropout_p):
    """Differentiable band attention with dropout on the weights (autograd keeps the bands)."""
    g = _Geometry(q.shape[1], k.shape[1], left, right)
    qb = g.pad_queries(q * scale)  # (N, nb, bq, d)
    kb, vb = g.pad_keys(k), g.pad_keys(v)  # (N, nb + m - 1, bq, d | dv)
    kbias, band = g.key_bias(lengths, q.device), g.band_bias(q.device)
    outs = []
    for b0, b1 in _chunks(g, q.shape[0]):
        s = qb[:, b0:b1] @ _bands(kb, b0, b1, g.m).transpose(-1, -2) + band  # (N, n, bq, W)
        s = s + _bands(kbias, b0, b1, g.m).reshape(kbias.shape[0], b1 - b0, 1, g.W)
        live = (s > float("-inf")).any(-1, keepdim=True)  # rows with a key
        w = torch.where(live, s, 0.0).softmax(-1) * live  # empty rows: 0
        outs.append(F.dropout(w, dropout_p) @ _bands(vb, b0, b1, g.m))  # (N, n, bq, dv)
    out = torch.cat(outs, dim=1)  # (N, nb, bq, dv)
    return out.view(q.shape[0], g.nb * g.bq, -1)[:, :g.lq]


def _flat_lengths(lengths: Tensor | None, lead: tuple[int, ...]) -> Tensor | None:
    """Padding lengths (B,) -> one per flattened leading row (N = prod(lead),)."""
    if lengths is None:
        return None
    if not lead:  # 2-D inputs: one sequence
        if lengths.numel() != 1:
            raise ValueError(f"local: padding lengths {tuple(lengths.shape)} need a batch dim on q")
        return lengths.reshape(1)
    per_row = 1
    for s in lead[1:]:
        per_row *= s
    return lengths.repeat_interleave(per_row)  # (B * prod(lead[1:]),)


def local_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float,
                    dropout_p: float, need_weights: bool) -> tuple[Tensor, None]:
    """Backend "local": q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    if need_weights:
        raise ValueError("backend 'local' cannot return weights; use backend='math'")
    if bias is not None:
        raise ValueError("backend 'local' takes no `bias`; use backend='chunked' (window + bias) or 'math'")
    parts = window_parts(mask)
    if parts is None:
        raise ValueError(f"backend 'local' needs a window mask (optionally & causal & padding), got {mask!r}")
    left, right, lengths = parts
    return band_attention(q, k, v, left, right, lengths, scale, dropout_p), None


def band_attention(q: Tensor, k: Tensor, v: Tensor, left: int, right: int, lengths: Tensor | None, scale: float,
                   dropout_p: float = 0.0) -> Tensor:
    """Keys [i - left, i + right] of each query (aligned to the end of the keys), the first
    ``lengths[b]`` keys of batch row b: q (..., Lq, d), k (..., Lk, d), v (..., Lk, dv) -> (..., Lq, dv)."""
    lead, lq, lk = q.shape[:-2], q.shape[-2], k.shape[-2]
    dtype = q.dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    qf = q.reshape(-1, lq, q.shape[-1]).to(work)  # (N, Lq, d)
    kf = k.reshape(-1, lk, k.shape[-1]).to(work)  # (N, Lk, d)
    vf = v.reshape(-1, lk, v.shape[-1]).to(work)  # (N, Lk, dv)
    lengths = _flat_lengths(lengths, tuple(lead))
    if dropout_p > 0:
        out = _local_dropout(qf, kf, vf, lengths, left, right, scale, dropout_p)
    else:
        out = _LocalFn.apply(qf, kf, vf, lengths, left, right, scale)
    return out.to(dtype).reshape(*lead, lq, v.shape[-1])  # (..., Lq, dv)


def _auto(q, k, mask, bias, need_weights) -> bool:
    """Pick "local" for window masks when the band is well under the key length."""
    if bias is not None or mask is None:
        return False
    parts = window_parts(mask)
    if parts is None:
        return False
    left, right, _ = parts
    lk = k.shape[-2]
    return lk >= 512 and 3 * (left + right + 1) <= lk  # measured crossover with sdpa+mask, 1 core


register_backend(Backend("local", local_attention, priority=30, auto=_auto))
