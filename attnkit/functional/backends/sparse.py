"""Exact sparse attention for unions of a window, a stride and global tokens, in O(L * (w + L/s + g)).

The patterns of the efficient-Transformer papers that keep softmax attention exact:

- Longformer / BigBird without the random part: ``window(w, w) | global_tokens(g)``;
- Sparse Transformer (Child et al. 2019), the merged strided pattern: ``window(s, s) | strided(s)``
  (``& causal()`` for the autoregressive one);
- any of ``window``, ``strided``, ``global_tokens`` alone or ``|``-combined, ``&``-combined with
  ``causal()`` and ``padding(lengths)``.

Nothing of size (Lq, Lk) is built. Each query's visible keys are the union of three parts, whose
scores are put side by side and normalised by one softmax:

- the window band: queries in blocks of ``bq`` rows; block I reads the ``W = bq + left + right`` keys
  ``[I*bq - left, I*bq + bq - 1 + right]`` (a strided view of the zero-padded keys, no copy):
  scores (N, nb, bq, W);
- the stride: sorted by position modulo s, the sequence becomes s interleaved sub-sequences of
  T = ceil(L / s) positions, and the strided pattern is dense attention inside each: a
  block-diagonal (block-sparse) product, scores (N, s, T, T), permuted back to (N, L, T);
- the global keys: (N, L, g).

A key reached by two parts counts once: the stride part hides keys inside the window, the global
part keys inside the window or on the query's stride. Global *queries* see every key; their g rows
are computed densely, (N, g, L), and replace the sparse result. Keys past a padding length are
zeroed before use, so NaN / inf there never reach an output; a NaN / inf in a value
hidden inside a band or stride block is kept out by a second, careful product (``functional.policy``),
run only when v is not finite. A query with nothing to attend to
gets zeros. Backward is autograd's; it keeps the same O(L * (W + T + g)) scores.

Requires Lq == Lk (self-attention). No bias, no weights. bfloat16 / float16 run in float32.
Exact: tested against the math path. Runs only when named: ``attnkit.functional.dispatch`` has no row for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..masks import Causal, GlobalTokens, Mask, Padding, Strided, Window, conjuncts, disjuncts
from ..policy import finite, visible_product
from . import Backend, Call, register_backend

__all__ = ["sparse_attention", "SparsePattern", "sparse_pattern"]

_NEG = float("-inf")


@dataclass(frozen=True, eq=False)
class SparsePattern:
    """What ``sparse_pattern`` reads from a mask. ``left is None``: no window part."""

    left: int | None
    right: int | None
    stride: int | None
    positions: tuple[int, ...]
    causal: bool
    lengths: Tensor | None


def sparse_pattern(mask: Mask | None) -> SparsePattern | None:
    """Read ``(window | strided | global_tokens, any non-empty union) [& causal] [& padding]``; else None."""
    union, causal, lengths = None, False, None
    for part in conjuncts(mask):
        if isinstance(part, Causal):
            causal = True
        elif isinstance(part, Padding):
            lengths = part.lengths if lengths is None else torch.minimum(lengths, part.lengths)
        elif union is None:
            union = part
        else:
            return None  # an intersection of two patterns
    left = right = stride = None
    positions: set[int] = set()
    for part in disjuncts(union):
        if isinstance(part, Window):  # a union of windows around i is the widest one
            left, right = max(left or 0, part.left), max(right or 0, part.right)
        elif isinstance(part, Strided) and stride in (None, part.stride):
            stride = part.stride
        elif isinstance(part, GlobalTokens):
            positions.update(part.positions)
        else:
            return None
    if union is None:
        return None
    return SparsePattern(left, right, stride, tuple(sorted(positions)), causal, lengths)


def _softmax(s: Tensor) -> Tensor:
    """Softmax over the last dim with -inf = hidden; rows with nothing visible give zeros (a NaN score is
    visible: it makes its row NaN, as in the math path)."""
    live = (s != _NEG).any(-1, keepdim=True)
    return torch.where(live, s, 0.0).softmax(-1) * live


class _Keys:
    """Which keys a query may see besides the pattern: causal, padding, inside [0, L)."""

    def __init__(self, length: int, causal: bool, lengths: Tensor | None):
        self.length, self.causal, self.lengths = length, causal, lengths

    def real(self, j: Tensor) -> Tensor:
        """Key indices j -> bool (N | 1, *j.shape): inside [0, L) and before the row's padding length."""
        ok = ((j >= 0) & (j < self.length)).unsqueeze(0)
        if self.lengths is not None:
            ok = ok & (j.unsqueeze(0) < self.lengths.view(-1, *([1] * j.dim())))
        return ok

    def visible(self, i: Tensor, j: Tensor, shown: Tensor | None = None) -> Tensor:
        """bool (N | 1, *shape): key j visible to query i (what ``hide`` leaves unhidden), for the careful pass."""
        ok = (j >= 0) & (j < self.length)
        if self.causal:
            ok = ok & (j <= i)
        if shown is not None:
            ok = ok & shown
        ok = ok.unsqueeze(0)
        if self.lengths is not None:
            ok = ok & (j.unsqueeze(0) < self.lengths.view(-1, *([1] * j.dim())))
        return ok

    def hide(self, s: Tensor, i: Tensor, j: Tensor, shown: Tensor | None = None) -> Tensor:
        """Scores s (N, *shape), in place: -inf where key j is not visible to query i (i, j and the pattern's
        ``shown`` broadcast to ``shape``, kept small; j has s.dim() - 1 dims; padding is applied per batch
        row on j's shape)."""
        ok = (j >= 0) & (j < self.length)
        if self.causal:
            ok = ok & (j <= i)
        if shown is not None:
            ok = ok & shown
        s.masked_fill_(~ok, _NEG)
        if self.lengths is not None:
            s.masked_fill_(j.unsqueeze(0) >= self.lengths.view(-1, *([1] * j.dim())), _NEG)  # (N, *j.shape)
        return s


def _band_block(width: int, length: int) -> int:
    return max(1, min(length, 32 if width <= 32 else 64))


def _band(q, k, v, left, right, keys: _Keys):
    """Window part: scores (N, L, W) and a function weights (N, L, W) -> output (N, L, dv)."""
    n, length, d = q.shape
    left, right = min(left, length), min(right, length)  # wider windows change nothing
    bq = _band_block(left + right + 1, length)
    nb = -(-length // bq)
    width = bq + left + right
    pad = (0, 0, left, nb * bq - length + right)  # keys of block I's band: [I*bq - left, I*bq + bq - 1 + right]
    kb = F.pad(k, pad).unfold(1, width, bq)  # (N, nb, d, W), a view
    vb = F.pad(v, pad).unfold(1, width, bq).transpose(-1, -2)  # (N, nb, W, dv)
    qb = F.pad(q, (0, 0, 0, nb * bq - length)).view(n, nb, bq, d)  # (N, nb, bq, d)
    dev = q.device
    i = (torch.arange(nb, device=dev) * bq).view(nb, 1, 1) + torch.arange(bq, device=dev).view(1, bq, 1)  # (nb, bq, 1)
    j = (torch.arange(nb, device=dev) * bq - left).view(nb, 1, 1) + torch.arange(width, device=dev)  # (nb, 1, W)
    shown = (j >= i - left) & (j <= i + right)
    s = keys.hide(qb @ kb, i, j, shown)  # (N, nb, bq, W)
    s = s.view(n, nb * bq, width)[:, :length]  # (N, L, W)

    def mix(w: Tensor, careful: bool) -> Tensor:
        wb = F.pad(w, (0, 0, 0, nb * bq - length)).view(n, nb, bq, width)  # (N, nb, bq, W)
        out = visible_product(wb, vb, keys.visible(i, j, shown)) if careful else wb @ vb  # (N, nb, bq, dv)
        return out.reshape(n, nb * bq, -1)[:, :length]  # (N, L, dv)

    return s, mix


def _strided(q, k, v, stride, window, keys: _Keys):
    """Stride part: scores (N, L, T) and weights (N, L, T) -> output (N, L, dv)."""
    n, length, d = q.shape
    t = -(-length // stride)
    lp = t * stride

    def split(x):  # (N, L, e) -> (N, s, T, e): sub-sequence r holds positions r, r + s, r + 2s, ...
        return F.pad(x, (0, 0, 0, lp - length)).view(n, t, stride, x.shape[-1]).transpose(1, 2)

    qs, ks, vs = split(q), split(k), split(v)
    dev = q.device
    r = torch.arange(stride, device=dev).view(stride, 1, 1)
    i = torch.arange(t, device=dev).view(1, t, 1) * stride + r  # (s, T, 1)
    j = torch.arange(t, device=dev).view(1, 1, t) * stride + r  # (s, 1, T)
    shown = None if window is None else ~((j >= i - window[0]) & (j <= i + window[1]))  # the band has those
    s = keys.hide(qs @ ks.transpose(-1, -2), i, j, shown)  # (N, s, T, T)
    s = s.transpose(1, 2).reshape(n, lp, t)[:, :length]  # (N, L, T), rows back in position order

    def mix(w: Tensor, careful: bool) -> Tensor:
        ws = F.pad(w, (0, 0, 0, lp - length)).view(n, t, stride, t).transpose(1, 2)  # (N, s, T, T)
        out = visible_product(ws, vs, keys.visible(i, j, shown)) if careful else ws @ vs  # (N, s, T, dv)
        return out.transpose(1, 2).reshape(n, lp, -1)[:, :length]  # (N, L, dv)

    return s, mix


def _global_keys(q, k, v, g: Tensor, window, stride, keys: _Keys):
    """Global keys: scores (N, L, g) and weights (N, L, g) -> output (N, L, dv)."""
    i = torch.arange(q.shape[1], device=q.device).view(-1, 1)  # (L, 1)
    j = g.view(1, -1)  # (1, g)
    shown = torch.ones((), dtype=torch.bool, device=q.device)
    if window is not None:
        shown = shown & ~((j >= i - window[0]) & (j <= i + window[1]))
    if stride is not None:
        shown = shown & ((i - j) % stride != 0)
    vg = v[:, g]  # (N, g, dv)
    s = keys.hide(q @ k[:, g].transpose(-1, -2), i, j, shown)  # (N, L, g)
    return s, (lambda w, careful: visible_product(w, vg, keys.visible(i, j, shown)) if careful else w @ vg)


def _sparse(q: Tensor, k: Tensor, v: Tensor, pat: SparsePattern, lengths: Tensor | None,
            dropout_p: float) -> Tensor:
    """q (N, L, d) already scaled, k (N, L, d), v (N, L, dv) -> (N, L, dv)."""
    n, length = q.shape[:2]
    keys = _Keys(length, pat.causal, lengths)
    if lengths is not None:  # hidden keys never reach an output, not even as 0 * NaN
        real = keys.real(torch.arange(length, device=q.device)).unsqueeze(-1)  # (N, L, 1)
        k, v = torch.where(real, k, 0.0), torch.where(real, v, 0.0)
    window = None if pat.left is None else (pat.left, pat.right)
    g = torch.as_tensor(pat.positions, dtype=torch.long, device=q.device)
    parts = []
    if window is not None:
        parts.append(_band(q, k, v, *window, keys))
    if pat.stride is not None:
        parts.append(_strided(q, k, v, pat.stride, window, keys))
    if len(g):
        parts.append(_global_keys(q, k, v, g, window, pat.stride, keys))
    careful = not finite(v)  # NaN / inf in v: multiply visible pairs only (a weight of 0 times NaN is NaN)
    scores = torch.cat([s for s, _ in parts], -1)  # (N, L, W + T + g)
    w = _softmax(scores)
    if dropout_p > 0:
        w = F.dropout(w, dropout_p)
    out = 0
    for piece, (_, mix) in zip(w.split([s.shape[-1] for s, _ in parts], -1), parts):
        out = out + mix(piece, careful)  # (N, L, dv)
    if len(g):  # global queries see every key (causal and padding still apply)
        gi, gj = g.view(-1, 1), torch.arange(length, device=q.device).view(1, -1)
        wg = _softmax(keys.hide(q[:, g] @ k.transpose(-1, -2), gi, gj))  # (N, g, L)
        if dropout_p > 0:
            wg = F.dropout(wg, dropout_p)
        rows = visible_product(wg, v, keys.visible(gi, gj)) if careful else wg @ v  # (N, g, dv)
        out = out.index_copy(1, g, rows)  # rows g replaced: (N, L, dv)
    return out


def sparse_attention(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float,
                     dropout_p: float, need_weights: bool) -> tuple[Tensor, None]:
    """Backend "sparse": q (..., L, d), k (..., L, d), v (..., L, dv) -> (..., L, dv). ``refuse`` has
    checked the call (a readable pattern, Lq == Lk)."""
    pat = sparse_pattern(mask)
    lead, length = tuple(q.shape[:-2]), q.shape[-2]
    if length == 0 or q.shape[:-2].numel() == 0:  # nothing to compute; keep the graph
        return (q.sum(-1, keepdim=True) + k.sum(-1, keepdim=True)) * 0.0 * v, None
    dtype = q.dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    qf = q.reshape(-1, length, q.shape[-1]).to(work) * scale  # (N, L, d)
    kf = k.reshape(-1, length, k.shape[-1]).to(work)  # (N, L, d)
    vf = v.reshape(-1, length, v.shape[-1]).to(work)  # (N, L, dv)
    lengths = pat.lengths
    if lengths is not None and (lengths.numel() == 0 or int(lengths.min()) >= length):
        lengths = None  # nothing is padded: skip the per-row masks
    if lengths is not None:  # (B,) -> one per flattened leading row (N,)
        if not lead and lengths.numel() != 1:
            raise ValueError(f"sparse: padding lengths {tuple(lengths.shape)} need a batch dim on q")
        lengths = lengths.to(q.device).view(-1, *([1] * max(len(lead) - 1, 0))).expand(*(lead or (1,))).reshape(-1)
    out = _sparse(qf, kf, vf, pat, lengths, dropout_p)  # (N, L, dv)
    return out.to(dtype).reshape(*lead, length, v.shape[-1]), None


def refuse(c: Call) -> str | None:
    if sparse_pattern(c.mask) is None:
        return (f"backend 'sparse' needs a union of window / strided / global_tokens masks, optionally & causal() "
                f"& padding(), e.g. (window(8, 8) | global_tokens(1)) & padding(lengths); got {c.mask!r}")
    if c.k.shape[-2] != c.q.shape[-2]:
        return (f"backend 'sparse' is for self-attention (Lq == Lk), got q {tuple(c.q.shape)}, "
                f"k {tuple(c.k.shape)}")
    return None


register_backend(Backend(
    "sparse", sparse_attention, "exact attention over window | strided | global-token unions, O(L * (w + L/s + g))",
    bias=False, masks="window | strided | global_tokens, & causal, & padding", refuse=refuse))
