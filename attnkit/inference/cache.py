"""What the autoregressive engine keeps between steps: ``StepCache``, and the K/V buffers it reuses.

The self-attention keys and values go into preallocated time-major buffers (capacity, B, H, dh), written in
place at each step (no ``torch.cat`` per step; the capacity doubles when full); attention reads the filled part
as a strided (B, H, t, dh) view. Moving rows (beams) copies nothing where the step's kernels run: the cache keeps
a row table (``StepCache.rows``: where each row's keys of each position are), which a move reorders, and the
kernels read the keys through it; elsewhere it copies the filled part only, into the buffers of the cache it was
moved from (``reorder``). The cross-attention keys and values are projected once and kept; when
the rows become beams (each row repeated K times) they are not copied K times: the K beams of a sentence are K
queries against its one set of keys (``group``).

A decoding's buffers are ``Held`` by all its caches; when the last cache is gone they become their engine's
pool, from which the next decoding takes buffers of the same shapes: their pages are already mapped (fresh
buffers cost a page fault per 4 KB on first write).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch import Tensor

from ..functional import native
from ..functional.masks import Mask, for_heads
from ..models.seq2seq import memory_mask_from

__all__ = ["StepCache", "Held", "Buffers", "reorder", "flatten"]


class Held:
    """The K/V buffers of one decoding, shared by all its caches (see the module doc)."""

    def __init__(self, pool: list[Tensor]):
        self.buffers: dict[int, Tensor] = {}  # id -> buffer, the ones its caches still use
        weakref.finalize(self, _recycle, pool, self.buffers)

    def drop(self, buffers: list[Tensor] | None) -> None:
        """Buffers no cache uses any more (outgrown, or of a batch size gone): freed, not pooled."""
        for t in buffers or ():
            self.buffers.pop(id(t), None)


def _recycle(pool: list[Tensor], buffers: dict[int, Tensor]) -> None:
    pool[:] = buffers.values()  # one finished decoding's buffers at most: the memory it used at its end


@dataclass
class StepCache:
    """What the engine keeps between steps. Rows follow the batch (reordered by ``reorder``)."""

    keys: list[Tensor]  # per layer (capacity, B, H, dh), time-major; positions [0, length) are filled
    values: list[Tensor]
    length: int
    cross_keys: list[Tensor]  # per layer (B / group, H, S, dh), projected once
    cross_values: list[Tensor]
    group: int = 1  # consecutive rows (the beams of a sentence) that share one row of cross_keys / values
    mask: Mask | None = None  # the memory mask of the cross-attention rows, for heads
    mask_source: Tensor | None = None  # the memory_mask tensor it came from (group 1)
    spare: list[Tensor] | None = None  # the buffers of the cache this one was reordered from, reused next time
    lens: tuple | None = None  # (mask, its key lengths as the native kernel takes them, or None: not a padding mask)
    held: Held | None = None  # every K/V buffer this decoding allocated (shared by its caches)
    # (B, capacity) int64: row i's keys and values of position p are in row rows[i, p] of the buffers, which may
    # then hold more rows than B (rows moved by ``reorder`` without a copy); None: in row i
    rows: Tensor | None = None


class Buffers:
    """An engine's pool of K/V buffers (the last finished decoding's) and the buffers' life in its caches."""

    def __init__(self):
        self.pool: list[Tensor] = []

    def take(self, held: Held, shape: tuple, like: Tensor) -> Tensor:
        """An uninitialised buffer of ``shape`` (like's dtype and device): from the pool when it has one, else new."""
        shape = torch.Size(shape)
        buf = None
        pool = self.pool
        for t in list(pool):  # a copy: a decoding that ends meanwhile replaces the pool
            if t.shape == shape and t.dtype == like.dtype and t.device == like.device:
                at = next((j for j, u in enumerate(pool) if u is t), None)  # by identity: == is elementwise
                if at is None:
                    continue
                del pool[at]
                buf = t
                break
        if buf is None:
            buf = like.new_empty(shape)
        held.buffers[id(buf)] = buf
        return buf

    def new(self, layers: int, b: int, h: int, dh: int, like: Tensor, capacity: int = 32) -> tuple:
        """(keys, values, held): per layer an empty (capacity, B, H, dh) buffer, and their ``Held``."""
        held = Held(self.pool)
        keys = [self.take(held, (capacity, b, h, dh), like) for _ in range(layers)]
        values = [self.take(held, (capacity, b, h, dh), like) for _ in range(layers)]
        return keys, values, held

    def grow(self, cache: StepCache) -> None:
        """Twice the capacity, the filled positions copied."""
        cap = cache.keys[0].shape[0]
        if cache.held is None:
            cache.held = Held(self.pool)
        for buffers in (cache.keys, cache.values):
            for i, t in enumerate(buffers):
                new = self.take(cache.held, (2 * cap, *t.shape[1:]), t)
                new[:cap] = t
                buffers[i] = new
                cache.held.drop([t])
        if cache.rows is not None:
            cache.rows = torch.cat((cache.rows, torch.zeros_like(cache.rows)), dim=1)  # (B, 2 cap)


def reorder(buffers: Buffers, cache: StepCache, index: Tensor, cross: bool, table: bool = False) -> StepCache:
    """Row i of the new cache is row ``index[i]`` of the old (``Seq2SeqEngine.reorder_cache``). ``table``: the
    step reads keys through a row table: move the rows by it where the buffers hold as many rows (no copy)."""
    n, layers = cache.length, len(cache.keys)
    if table and n and index.numel() <= cache.keys[0].shape[1]:
        rows = (cache.rows.index_select(0, index) if cache.rows is not None
                else index[:, None].expand(-1, cache.keys[0].shape[0]).contiguous())  # (B', capacity)
        out = StepCache(cache.keys, cache.values, n, cache.cross_keys, cache.cross_values, cache.group, cache.mask,
                        cache.mask_source, spare=cache.spare, held=cache.held, rows=rows)
        return _move_cross(out, cache, index) if cross else out
    if cache.rows is not None:
        flatten(buffers, cache)
    old = cache.keys + cache.values
    shape = (old[0].shape[0], index.numel(), *old[0].shape[2:])
    held = cache.held if cache.held is not None else Held(buffers.pool)
    if cache.spare and cache.spare[0].shape == shape:
        spare = cache.spare
    else:
        held.drop(cache.spare)
        spare = [buffers.take(held, shape, b) for b in old]
    new = [_select_rows(b, index, n, into) for b, into in zip(old, spare)]
    # the old buffers become the spare set of the next move (no fresh allocation per beam-search step):
    # a cache must not be used after it was passed here
    out = StepCache(new[:layers], new[layers:], n, cache.cross_keys, cache.cross_values, cache.group, cache.mask,
                    cache.mask_source, spare=old, held=held)
    return _move_cross(out, cache, index) if cross else out  # else: rows stay within their sentence


def _move_cross(out: StepCache, cache: StepCache, index: Tensor) -> StepCache:
    """The cross-attention rows of ``out`` after the move ``index``: shared by the beams a row became, selected
    when whole sentences leave or stay, else one per row again."""
    g, rows = cache.group, cache.cross_keys[0].shape[0] * cache.group
    k = index.numel() // rows
    if g == 1 and k > 1 and index.numel() == k * rows and torch.equal(
            index, torch.arange(rows, device=index.device).repeat_interleave(k)):
        out.group = k  # each row became k beams: they share its cross-attention row
        return out
    if g > 1 and index.numel() % g == 0:
        first = index.view(-1, g)[:, 0]
        if bool((first % g == 0).all()) and torch.equal(index.view(-1, g),
                                                        first[:, None] + torch.arange(g, device=index.device)):
            sel = first // g  # whole sentences leave or stay: select their cross-attention rows
            out.cross_keys = [c.index_select(0, sel) for c in cache.cross_keys]
            out.cross_values = [c.index_select(0, sel) for c in cache.cross_values]
            if cache.mask_source is not None:
                out.mask_source = cache.mask_source.index_select(0, sel)
                out.mask = for_heads(memory_mask_from(out.mask_source, out.mask_source.shape[1]))
            return out
    cross_index = index // g  # any other move: one cross-attention row per row again
    out.cross_keys = [c.index_select(0, cross_index) for c in cache.cross_keys]
    out.cross_values = [c.index_select(0, cross_index) for c in cache.cross_values]
    out.group, out.mask, out.mask_source = 1, None, None  # the mask is read again from memory_mask
    return out


def _select_rows(buf: Tensor, index: Tensor, n: int, into: Tensor) -> Tensor:
    """A time-major buffer (capacity, B, H, dh) -> ``into`` (capacity, B', H, dh), a buffer free to overwrite,
    with rows ``index`` of buf's first n steps: the native kernel's memcpy of whole rows where it runs (faster than
    ``index_select`` on buffers past the caches: docs/design.md), else ``index_select``."""
    if not n:
        return into
    kernel = native.kernel()
    if kernel is not None and buf.device.type == "cpu" and buf.is_contiguous() and into.is_contiguous():
        kernel.gather_rows(buf, native.lengths_arg(index), n, into)
    else:
        torch.index_select(buf[:n], 1, index, out=into[:n])
    return into


def flatten(buffers: Buffers, cache: StepCache) -> None:
    """Rows back in order: row i's keys and values of every position in row i of new buffers (B rows), and no row
    table (for a step that reads the buffers as they lie)."""
    if cache.rows is None:
        return
    n, b = cache.length, cache.rows.shape[0]
    held = cache.held if cache.held is not None else Held(buffers.pool)
    where = (torch.arange(n, device=cache.rows.device)[:, None], cache.rows[:, :n].T)  # (n, 1), (n, B)
    for bufs in (cache.keys, cache.values):
        for i, t in enumerate(bufs):
            new = buffers.take(held, (t.shape[0], b, *t.shape[2:]), t)
            new[:n] = t[:n][where]  # (n, B, H, dh)
            bufs[i] = new
            held.drop([t])
    cache.rows, cache.spare, cache.held = None, None, held
