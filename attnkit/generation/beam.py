"""Batched beam search: ``beam_search`` reads as the algorithm, ``BeamState`` keeps what it keeps.

Hugging Face's (transformers 4.50+) rules, so scores and stopping agree with it: at each step the 2K best
continuations of all K beams of a sentence are ranked; a continuation that ends (END, or the length limit) and
ranks among the first K joins the sentence's finished hypotheses with score log p / length ** length_penalty
(length = generated tokens, END included); the K best continuations that do not end are the next step's beams. A
sentence stops taking hypotheses when its K finished ones cannot be beaten: ``early_stopping=True`` as soon as it
has K; ``False`` when the best running beam, normalised by its current length, is no better than the worst
finished one; "never" uses the longest allowed length in that bound when length_penalty > 0, which makes it
exact. The first step runs once per sentence (all beams would be equal): the encoder's keys and values for
cross-attention are projected once per sentence, then copied to its K beams. A sentence that is closed leaves the
batch (its rows of memory, mask and cache are dropped) once such sentences are a quarter of those left; its best
hypothesis is kept.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from .logits import NEG_INF, constrain
from .protocol import TokenIds
from .search import Hypotheses, _step

__all__ = ["beam_search", "BeamState"]


def beam_search(model, memory, mask, ids: TokenIds, *, num_beams: int, max_new_tokens: int, min_new_tokens: int,
                suppress: Tensor | None, use_cache: bool, output_attentions: bool, length_penalty: float,
                early_stopping: bool | str, forced_eos: int | None = None, renormalize: bool = False) -> Hypotheses:
    """Beam search over all sentences and beams at once (rows = sentences x beams); see the module doc."""
    beams = BeamState(memory.shape[0], num_beams, max_new_tokens, ids, memory, length_penalty, early_stopping)
    cache = None
    for step in range(max_new_tokens):
        st = _step(model, beams.inputs(), memory, mask, cache, use_cache, output_attentions)
        logp = constrain(st.logp, step=step, eos_token_id=ids.eos, min_new_tokens=min_new_tokens, suppress=suppress,
                         force=None if forced_eos is None else (max_new_tokens - 1, forced_eos),
                         renormalize=renormalize)
        cand = beams.candidates(logp, step + 1)  # the 2K best continuations of each sentence
        beams.finish(cand, step + 1, st.attention)  # those that end join its finished hypotheses
        expanding = beams.k != num_beams  # the first step: one row per sentence becomes K
        rows = beams.advance(cand, st.attention)  # the K best that do not end: the next step's beams
        if use_cache:
            cache = model.reorder_cache(st.cache, rows, cross=expanding)
        if expanding:
            memory, mask = _rows(memory, mask, rows)
        if beams.stop(step + 1):
            break
        rows = beams.leave()  # closed sentences leave the batch
        if rows is not None:
            memory, mask = _rows(memory, mask, rows)
            if use_cache:
                cache = model.reorder_cache(cache, rows)
    return beams.hypotheses()


def _rows(memory: Tensor, mask: Tensor | None, rows: Tensor) -> tuple[Tensor, Tensor | None]:
    return memory.index_select(0, rows), None if mask is None else mask.index_select(0, rows)


class Candidates(NamedTuple):
    scores: Tensor  # (B, n) summed log-probabilities, best first
    beam: Tensor  # (B, n) the parent beam
    token: Tensor  # (B, n) the new token
    ends: Tensor  # (B, n) bool: END, or the length limit


class BeamState:
    """The sentences still decoding: their K running beams and K finished hypotheses; the best hypothesis of each
    sentence that has left (``result``). B sentences (fewer as they leave), k beams (1 before the first step)."""

    def __init__(self, b: int, num_beams: int, max_new_tokens: int, ids: TokenIds, memory: Tensor,
                 length_penalty: float, early_stopping: bool | str):
        dev, fdt = memory.device, torch.promote_types(memory.dtype, torch.float32)  # scores in float32 or wider
        self.k_max, self.max_new_tokens, self.ids = num_beams, max_new_tokens, ids
        self.length_penalty, self.early_stopping = length_penalty, early_stopping
        self.sent = torch.arange(b, device=dev)  # the sentence of each one still decoding
        self.result = _Best(b, max_new_tokens, ids.pad, dev, fdt)
        self.tokens = torch.full((b, 1, 1), ids.start, dtype=torch.long, device=dev)  # (B, k, 1 + t) running
        self.scores = torch.zeros(b, 1, device=dev, dtype=fdt)  # (B, k) sum of log-probabilities
        self.attention: Tensor | None = None  # (B, k, t, L, H, S)
        self.fin = _Finished(b, num_beams, max_new_tokens, ids.pad, dev, fdt)
        self.open = torch.ones(b, dtype=torch.bool, device=dev)  # can a better hypothesis still come?

    @property
    def k(self) -> int:
        """Beams per sentence: 1 before the first step, then K."""
        return self.tokens.shape[1]

    def inputs(self) -> Tensor:
        """Every running beam's tokens so far, (B k, 1 + t)."""
        return self.tokens.view(len(self.tokens) * self.k, -1)

    def candidates(self, logp: Tensor, gen_len: int) -> Candidates:
        """logp (B k, V) of the next token -> the 2K best continuations of each sentence's beams."""
        v = logp.shape[-1]
        cand = (self.scores.view(-1, 1) + logp).view(len(self.tokens), self.k * v)  # (B, k V)
        top, idx = cand.topk(min(2 * self.k_max, self.k * v), dim=1)  # (B, n), best first
        tok = idx % v
        return Candidates(top, idx // v, tok, (tok == self.ids.eos) | (gen_len == self.max_new_tokens))

    def finish(self, c: Candidates, gen_len: int, attention: Tensor | None) -> None:
        """Candidates that end, rank among the first K and are finite join the finished hypotheses of their
        sentence while it takes them. attention (B k, L, H, S): the step's, or None."""
        n = c.scores.shape[1]
        takes = self.open & ~(self.fin.full() & (self.early_stopping is True))
        new = c.ends & (torch.arange(n, device=c.scores.device) < self.k_max) & (c.scores > NEG_INF) & takes[:, None]
        if not bool(new.any()):
            return
        seqs = torch.cat((_gather_rows(self.tokens, c.beam)[:, :, 1:], c.token[..., None]), dim=2)  # (B, n, t)
        hist = None
        if attention is not None:
            parents = torch.arange(len(self.tokens), device=c.beam.device)[:, None] * self.k + c.beam  # (B, n) rows
            hist = attention[parents][:, :, None]
            if self.attention is not None:
                hist = torch.cat((_gather_rows(self.attention, c.beam), hist), dim=2)  # (B, n, t, L, H, S)
        self.fin.add(new, c.scores, seqs, gen_len, self.length_penalty, hist)

    def advance(self, c: Candidates, attention: Tensor | None) -> Tensor:
        """The K best continuations that do not end become the beams -> the row (B K,) of each one's parent."""
        b, k, going, beam, tok = len(self.tokens), self.k, c.scores.masked_fill(c.ends, NEG_INF), c.beam, c.token
        if going.shape[1] < self.k_max:  # a vocabulary smaller than the beam: fill with dead beams
            fill = self.k_max - going.shape[1]
            going = torch.cat((going, going.new_full((b, fill), NEG_INF)), dim=1)
            beam = torch.cat((beam, beam.new_zeros((b, fill))), dim=1)
            tok = torch.cat((tok, tok.new_full((b, fill), self.ids.pad)), dim=1)
        self.scores, pos = going.topk(self.k_max, dim=1)  # (B, K)
        rows = (torch.arange(b, device=beam.device)[:, None] * k + beam.gather(1, pos)).view(-1)  # (B K,)
        self.tokens = torch.cat((self.inputs()[rows].view(b, self.k_max, -1), tok.gather(1, pos)[..., None]), dim=2)
        if attention is not None:
            new = attention[rows].view(b, self.k_max, 1, *attention.shape[1:])
            old = self.attention
            self.attention = new if old is None else torch.cat(
                (old.view(b * k, *old.shape[2:])[rows].view(b, self.k_max, *old.shape[2:]), new), dim=2)
        return rows

    def stop(self, gen_len: int) -> bool:
        """Close the sentences no running beam can improve; True when decoding is over."""
        bound_len = self.max_new_tokens if (self.early_stopping == "never" and self.length_penalty > 0) else gen_len
        best_possible = self.scores[:, 0] / float(bound_len) ** self.length_penalty
        full = self.fin.full()
        worst = torch.where(full, self.fin.scores.min(dim=1).values, torch.full_like(best_possible, NEG_INF))
        self.open &= best_possible > worst
        return not bool(self.open.any()) or (self.early_stopping is True and bool(full.all()))

    def leave(self) -> Tensor | None:
        """Once closed sentences are a quarter of those decoding: their best hypotheses to ``result``, the others
        kept -> the rows (B' K,) that stay, in order; None while they stay."""
        closed = (~self.open).nonzero().squeeze(1)
        if not len(closed) or 4 * len(closed) < len(self.tokens):
            return None
        self.result.take(self.sent[closed], self.fin.select(closed))
        keep = self.open.nonzero().squeeze(1)
        self.sent, self.open, self.tokens, self.scores = self.sent[keep], self.open[keep], self.tokens[keep], \
            self.scores[keep]
        self.attention = None if self.attention is None else self.attention[keep]
        self.fin = self.fin.select(keep)
        return (keep[:, None] * self.k_max + torch.arange(self.k_max, device=keep.device)).view(-1)

    def hypotheses(self) -> Hypotheses:
        self.result.take(self.sent, self.fin)
        return self.result.hypotheses()


class _Finished:
    """Each sentence's K best finished hypotheses, best first: tokens (B, K, T) padded, log-probabilities, scores
    (length-penalised; -inf: an empty slot), lengths (B, K), cross-attention (B, K, T, L, H, S) or None."""

    def __init__(self, b: int, k: int, max_new_tokens: int, pad: int, dev, fdt, _empty: bool = False):
        if _empty:
            return
        self.k, self.t, self.pad = k, max_new_tokens, pad
        self.tokens = torch.full((b, k, max_new_tokens), pad, dtype=torch.long, device=dev)
        self.scores = torch.full((b, k), NEG_INF, device=dev, dtype=fdt)
        self.log_probs = torch.full((b, k), NEG_INF, device=dev, dtype=fdt)
        self.lengths = torch.zeros((b, k), dtype=torch.long, device=dev)
        self.attention: Tensor | None = None

    def full(self) -> Tensor:
        """(B,) bool: K hypotheses already."""
        return (self.scores > NEG_INF).all(dim=1)

    def add(self, new: Tensor, scores: Tensor, seqs: Tensor, gen_len: int, length_penalty: float,
            attention: Tensor | None) -> None:
        """The candidates ``new`` (B, n) with their summed log-probabilities ``scores`` (B, n), tokens ``seqs``
        (B, n, gen_len) and attention (B, n, gen_len, L, H, S) join, the K best of each sentence kept."""
        norm = (scores / float(gen_len) ** length_penalty).masked_fill(~new, NEG_INF)
        merged = torch.cat((self.scores, norm), dim=1)  # (B, K + n)
        keep = merged.topk(self.k, dim=1).indices  # (B, K)
        self.scores = merged.gather(1, keep)
        self.log_probs = torch.cat((self.log_probs, scores.masked_fill(~new, NEG_INF)), dim=1).gather(1, keep)
        self.lengths = torch.cat((self.lengths, torch.full_like(new, gen_len, dtype=torch.long)), dim=1).gather(1, keep)
        self.tokens = _gather_rows(torch.cat((self.tokens, _pad_to(seqs, self.t, self.pad)), dim=1), keep)
        if attention is not None:
            hist = _pad_to(attention, self.t, 0.0)  # (B, n, T, L, H, S)
            if self.attention is None:
                self.attention = hist.new_zeros((hist.shape[0], self.k, *hist.shape[2:]))
            self.attention = _gather_rows(torch.cat((self.attention, hist), dim=1), keep)

    def select(self, index: Tensor) -> _Finished:
        """The hypotheses of sentences ``index`` (n,)."""
        out = _Finished(0, 0, 0, 0, None, None, _empty=True)
        out.k, out.t, out.pad = self.k, self.t, self.pad
        out.tokens, out.scores, out.log_probs = self.tokens[index], self.scores[index], self.log_probs[index]
        out.lengths = self.lengths[index]
        out.attention = None if self.attention is None else self.attention[index]
        return out


class _Best:
    """The best finished hypothesis of each sentence, filled in as sentences leave the batch."""

    def __init__(self, b: int, max_new_tokens: int, pad: int, dev, fdt):
        self.tokens = torch.full((b, max_new_tokens), pad, dtype=torch.long, device=dev)
        self.log_probs = torch.full((b,), NEG_INF, device=dev, dtype=fdt)
        self.scores = torch.full((b,), NEG_INF, device=dev, dtype=fdt)
        self.lengths = torch.zeros(b, dtype=torch.long, device=dev)
        self.attention: Tensor | None = None  # (B, T, L, H, S)

    def take(self, sent: Tensor, fin: _Finished) -> None:
        """Sentences ``sent`` (n,) with their finished hypotheses (n of them), best first."""
        self.tokens[sent], self.log_probs[sent], self.scores[sent] = fin.tokens[:, 0], fin.log_probs[:, 0], \
            fin.scores[:, 0]
        self.lengths[sent] = fin.lengths[:, 0]
        if fin.attention is not None:
            if self.attention is None:
                self.attention = fin.attention.new_zeros((self.tokens.shape[0], *fin.attention.shape[2:]))
            self.attention[sent] = fin.attention[:, 0]

    def hypotheses(self) -> Hypotheses:
        return Hypotheses(self.tokens, self.log_probs, self.scores, self.lengths, self.attention)


def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """x (B, k, ...), index (B, n) -> (B, n, ...): x[b, index[b, j]]."""
    return x[torch.arange(x.shape[0], device=x.device)[:, None], index]


def _pad_to(x: Tensor, length: int, value) -> Tensor:
    """Pad dim 2 of x (B, n, t, ...) to ``length`` with ``value``."""
    extra = length - x.shape[2]
    if extra <= 0:
        return x
    return torch.cat((x, x.new_full((*x.shape[:2], extra, *x.shape[3:]), value)), dim=2)
