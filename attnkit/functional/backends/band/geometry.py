"""Block geometry of band attention: which keys each block of queries can see, in padded buffers.

Queries are cut into blocks of ``bq`` rows. Query block ``b`` can only see the keys
``[b*bq + off - left, b*bq + off + bq - 1 + right]`` (``off = Lk - Lq``, queries aligned to the end
of the keys), a band of ``m`` key blocks, ``W = m * bq`` keys wide. The keys are copied once into a
zero-padded buffer cut into blocks of ``bq`` rows, so block ``b``'s band is the key blocks
``b .. b + m - 1``. Inside the band, the window is one constant (bq, W) pattern (row r sees columns
r .. r + left + right); keys outside [0, Lk) or past a padding length are masked per column.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["Geometry", "block_size", "bands", "band_view", "chunks", "dirty_blocks", "runs"]

CHUNK_ELEMS = 1 << 17  # scores per chunk (N * n * bq * W): 512 KB in float32, stays in cache


def block_size(band: int, fused: bool = False) -> int:
    """Query block rows: small tiles waste less of the band, large tiles run faster GEMMs.
    Blocked matmuls: 32 rows for bands up to 32 wide, 64 up to 512, else 128 (why 64 and not 32 or 128 for a
    257-wide band: docs/design.md).
    Fused kernel: it cuts queries into tiles of 32 anyway, so 32 (16 for narrow bands) wastes least."""
    if fused:
        return 16 if band <= 32 else 32
    return 32 if band <= 32 else 64 if band <= 512 else 128


class Geometry:
    """Block layout for Lq queries, Lk keys and a window (left, right)."""

    def __init__(self, lq: int, lk: int, left: int, right: int, bq: int | None = None, fused: bool = False):
        self.lq, self.lk = lq, lk
        left, right = min(left, lq + lk), min(right, lq + lk)  # wider windows change nothing
        self.left, self.right = left, right
        self.bq = bq or block_size(left + right + 1, fused)
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

    def unpad_queries(self, x: Tensor) -> Tensor:
        """(N, nb, bq, e) -> (N, Lq, e) (or (N, nb, bq) -> (N, Lq))."""
        n = x.shape[0]
        flat = x.reshape(n, self.nb * self.bq, *x.shape[3:])
        return flat[:, :self.lq]

    def key_ok(self, lengths: Tensor | None, device) -> Tensor:
        """Real, unpadded key columns: (N or 1, nb + m - 1, 1, bq) bool."""
        j = self.start + torch.arange(self.lp, device=device)  # (Lp,) real key index
        ok = ((j >= 0) & (j < self.lk)).unsqueeze(0)  # (1, Lp)
        if lengths is not None:
            ok = ok & (j.unsqueeze(0) < lengths.to(device).unsqueeze(1))  # (N, Lp)
        return ok.view(ok.shape[0], self.nb + self.m - 1, 1, self.bq)

    def key_bias(self, lengths: Tensor | None, device) -> Tensor:
        """``key_ok`` as an additive 0 / -inf float32 mask."""
        ok = self.key_ok(lengths, device)
        return torch.zeros(ok.shape, device=device).masked_fill_(~ok, float("-inf"))

    def band_ok(self, device) -> Tensor:
        """(bq, W) bool: row r sees band columns r .. r + left + right."""
        r = torch.arange(self.bq, device=device).unsqueeze(1)  # (bq, 1)
        c = torch.arange(self.W, device=device).unsqueeze(0)  # (1, W)
        return (c >= r) & (c <= r + self.left + self.right)

    def band_bias(self, device) -> Tensor:
        """``band_ok`` as an additive 0 / -inf float32 mask."""
        ok = self.band_ok(device)
        return torch.zeros(ok.shape, device=device).masked_fill_(~ok, float("-inf"))


def bands(x: Tensor, b0: int, b1: int, m: int) -> Tensor:
    """Blocks (N, nb + m - 1, bq, e) -> bands of blocks b0..b1-1: (N, b1 - b0, m * bq, e)."""
    return torch.cat([x[:, b0 + s:b1 + s] for s in range(m)], dim=2)


def band_view(x: Tensor, b0: int, b1: int, g: Geometry) -> Tensor:
    """Blocks (N, nb + m - 1, bq, e) -> overlapping bands of blocks b0..b1-1, no copy: (N, b1 - b0, W, e)."""
    n, e = x.shape[0], x.shape[-1]
    return x.as_strided((n, b1 - b0, g.W, e), (x.stride(0), g.bq * e, e, 1), x.storage_offset() + b0 * g.bq * e)


def chunks(g: Geometry, n_rows: int):
    """Ranges of query blocks [b0, b1) whose scores fit in ``CHUNK_ELEMS``."""
    step = max(1, CHUNK_ELEMS // max(1, n_rows * g.bq * g.W))
    for b0 in range(0, g.nb, step):
        yield b0, min(g.nb, b0 + step)


def dirty_blocks(g: Geometry, kbias: Tensor) -> list[bool]:
    """Per query block: does its band touch a hidden key (edge of the sequence or padding)?"""
    bad = (kbias == float("-inf")).flatten(2).any(-1).any(0).long()  # (nb + m - 1,) blocks with a hidden key
    csum = torch.cat((bad.new_zeros(1), bad.cumsum(0)))  # (nb + m,)
    return ((csum[g.m:g.m + g.nb] - csum[:g.nb]) > 0).tolist()  # any hidden key in blocks b .. b + m - 1


def runs(flags: list[bool]) -> list[tuple[bool, int, int]]:
    """Maximal runs of equal flags: [(flag, start, stop), ...]."""
    out, start = [], 0
    for flag, group in itertools.groupby(flags):
        stop = start + len(list(group))
        out.append((flag, start, stop))
        start = stop
    return out
