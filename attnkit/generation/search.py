"""The decoding loops: one token per step (greedy or sampled) and batched beam search.

Both loops ask the model for one step at a time (``protocol.EncoderDecoder``) and keep the decoder's
K/V cache between steps. They return ``Hypotheses``: the generated tokens (without the start token,
pad after END), the model's log-probability of each, its length-penalised score and, when asked, the
cross-attention of every generated token.

Beam search follows Hugging Face's (transformers 4.50+) rules, so scores and stopping agree with it:
at each step the 2K best continuations of all K beams of a sentence are ranked; a continuation that
ends (END, or the length limit) and ranks among the first K joins the sentence's finished hypotheses
with score log p / length ** length_penalty (length = generated tokens, END included); the K best
continuations that do not end are the next step's beams. A sentence stops taking hypotheses when its
K finished ones cannot be beaten: ``early_stopping=True`` as soon as it has K; ``False`` when the best
running beam, normalised by its current length, is no better than the worst finished one; "never"
uses the longest allowed length in that bound when length_penalty > 0, which makes it exact.
The first step runs once per sentence (all beams would be equal): the encoder's keys and values for
cross-attention are projected once per sentence, then copied to its K beams.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from .logits import NEG_INF, constrain, sample, warp
from .protocol import TokenIds

__all__ = ["Hypotheses", "greedy_or_sample", "beam_search"]


class Hypotheses(NamedTuple):
    tokens: Tensor  # (B, T) generated tokens, pad after END
    log_probs: Tensor  # (B,) sum of the model's log-probabilities of the generated tokens
    scores: Tensor  # (B,) log_probs / length ** length_penalty
    lengths: Tensor  # (B,) generated tokens, END included
    cross_attentions: Tensor | None  # (B, T, layers, heads, S): the attention that produced each token


class _Step(NamedTuple):
    logp: Tensor  # (rows, V) float32 log-probabilities
    cache: object
    attention: Tensor | None  # (rows, layers, heads, S) of the last position


def _step(model, tokens: Tensor, memory, mask, cache, use_cache: bool, want_attention: bool) -> _Step:
    inp = tokens[:, -1:] if (use_cache and cache is not None) else tokens  # (rows, 1) or (rows, t)
    out = model.decode_step(inp, memory, mask, cache, use_cache=use_cache, output_attentions=want_attention)
    logits = out.logits
    logp = logits.to(torch.promote_types(logits.dtype, torch.float32)).log_softmax(dim=-1)  # float32 or wider
    attn = None
    if want_attention:
        attn = torch.stack([a[:, :, -1].float() for a in out.cross_attentions], dim=1)  # (rows, L, H, S)
    return _Step(logp, out.cache if use_cache else None, attn)


def greedy_or_sample(model, memory, mask, ids: TokenIds, *, max_new_tokens: int, min_new_tokens: int,
                     suppress: Tensor | None, use_cache: bool, output_attentions: bool, length_penalty: float,
                     do_sample: bool = False, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float = 1.0, generator: torch.Generator | None = None) -> Hypotheses:
    """One token per step for each of the B sentences: the most likely one, or a sample.

    Finished sentences leave the batch (their rows of memory, mask and cache are dropped) once they are a
    quarter of the rows still decoding or more: a smaller batch per step, at the price of one cache copy.
    """
    b, dev = memory.shape[0], memory.device
    out = torch.full((b, 1 + max_new_tokens), ids.pad, dtype=torch.long, device=dev)  # start + generated tokens
    out[:, 0] = ids.start
    log_probs = torch.zeros(b, device=dev, dtype=torch.promote_types(memory.dtype, torch.float32))
    lengths = torch.zeros(b, dtype=torch.long, device=dev)
    attention: Tensor | None = None  # (B, T, L, H, S)
    rows = torch.arange(b, device=dev)  # the sentence of each row still in the batch
    every = True  # rows is still arange(b): plain slices instead of indexing
    done = torch.zeros(b, dtype=torch.bool, device=dev)  # per row: END already generated
    n_done = 0
    cache = None
    for step in range(max_new_tokens):
        if use_cache and cache is not None:
            inp = out[:, step:step + 1] if every else out[rows, step:step + 1]
        else:
            inp = out[:, :step + 1] if every else out[rows, :step + 1]
        logp, cache, attn = _step(model, inp, memory, mask, cache, use_cache, output_attentions)
        logp = constrain(logp, step=step, eos_token_id=ids.eos, min_new_tokens=min_new_tokens, suppress=suppress)
        if do_sample:
            nxt = sample(warp(logp, temperature=temperature, top_k=top_k, top_p=top_p), generator)
        else:
            nxt = logp.argmax(dim=-1)
        chosen = logp.gather(1, nxt[:, None]).view(-1)
        if n_done == 0 and every:  # no row has ended: the same updates, without indexing
            out[:, step + 1] = nxt
            log_probs += chosen
            lengths += 1
        else:
            live = ~done
            out[rows[live], step + 1] = nxt[live]  # nothing after END: finished rows keep their padding
            log_probs[rows] += chosen.masked_fill(done, 0.0)
            lengths[rows] += live.long()
        if attn is not None:
            if attention is None:
                attention = attn.new_zeros((b, max_new_tokens, *attn.shape[1:]))
            attention[rows[~done], step] = attn[~done]
        ended = nxt == ids.eos
        if n_done == 0 and not bool(ended.any()):
            continue  # still no row has ended
        done |= ended
        n_done = int(done.sum())
        if n_done == len(rows):
            break
        if 4 * n_done >= len(rows):  # drop the finished rows
            keep = (~done).nonzero().squeeze(1)
            rows, done, n_done, every = rows[keep], done[keep], 0, False
            memory = memory.index_select(0, keep)
            mask = None if mask is None else mask.index_select(0, keep)
            if use_cache:
                cache = model.reorder_cache(cache, keep)
    scores = log_probs / lengths.clamp(min=1).float() ** length_penalty
    return Hypotheses(out[:, 1:], log_probs, scores, lengths, attention)


def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """x (B, k, ...), index (B, n) -> (B, n, ...): x[b, index[b, j]]."""
    return x[torch.arange(x.shape[0], device=x.device)[:, None], index]


def _pad_to(x: Tensor, length: int, value) -> Tensor:
    """Pad dim 2 of x (B, n, t, ...) to ``length`` with ``value``."""
    extra = length - x.shape[2]
    if extra <= 0:
        return x
    return torch.cat((x, x.new_full((*x.shape[:2], extra, *x.shape[3:]), value)), dim=2)


def beam_search(model, memory, mask, ids: TokenIds, *, num_beams: int, max_new_tokens: int, min_new_tokens: int,
                suppress: Tensor | None, use_cache: bool, output_attentions: bool, length_penalty: float,
                early_stopping: bool | str) -> Hypotheses:
    """Beam search over all sentences and beams at once (rows = sentences x beams); see the module doc.

    A sentence whose finished hypotheses can no longer be beaten leaves the batch (its rows of memory, mask
    and cache are dropped) once such sentences are a quarter of those left; its best hypothesis is kept.
    """
    b, dev, k_max = memory.shape[0], memory.device, num_beams
    arange_b = torch.arange(b, device=dev)
    sent = arange_b  # the sentence of each live position
    result = _Best(b, max_new_tokens, ids.pad, dev, torch.promote_types(memory.dtype, torch.float32))
    run_tokens = torch.full((b, 1, 1), ids.start, dtype=torch.long, device=dev)  # (B, k, 1 + t); k = 1 at first
    fdt = torch.promote_types(memory.dtype, torch.float32)  # scores in float32, or float64 for float64 models
    run_scores = torch.zeros(b, 1, device=dev, dtype=fdt)  # (B, k) sum of log-probabilities
    run_attn: Tensor | None = None  # (B, k, t, L, H, S)
    fin_tokens = torch.full((b, k_max, max_new_tokens), ids.pad, dtype=torch.long, device=dev)
    fin_scores = torch.full((b, k_max), NEG_INF, device=dev, dtype=fdt)  # length-penalised; -inf = empty slot
    fin_logp = torch.full((b, k_max), NEG_INF, device=dev, dtype=fdt)
    fin_len = torch.zeros((b, k_max), dtype=torch.long, device=dev)
    fin_attn: Tensor | None = None  # (B, K, T, L, H, S)
    still_open = torch.ones(b, dtype=torch.bool, device=dev)  # can a better hypothesis still come?
    cache = None
    for step in range(max_new_tokens):
        k = run_tokens.shape[1]
        st = _step(model, run_tokens.view(b * k, -1), memory, mask, cache, use_cache, output_attentions)
        logp = constrain(st.logp, step=step, eos_token_id=ids.eos, min_new_tokens=min_new_tokens, suppress=suppress)
        v = logp.shape[-1]
        cand = (run_scores.view(b * k, 1) + logp).view(b, k * v)  # (B, k V)
        n = min(2 * k_max, k * v)
        top, idx = cand.topk(n, dim=1)  # (B, n), best first
        beam, tok = idx // v, idx % v  # (B, n) parent beam and new token
        gen_len = step + 1
        ends = (tok == ids.eos) | (gen_len == max_new_tokens)

        # finished hypotheses: candidates that end, rank among the first K, while the sentence takes them
        full = (fin_scores > NEG_INF).all(dim=1)
        takes = still_open & ~(full & (early_stopping is True))
        new_fin = ends & (torch.arange(n, device=dev) < k_max) & (top > NEG_INF) & takes[:, None]
        if bool(new_fin.any()):
            seqs = torch.cat((_gather_rows(run_tokens, beam)[:, :, 1:], tok[..., None]), dim=2)  # (B, n, gen_len)
            norm = (top / float(gen_len) ** length_penalty).masked_fill(~new_fin, NEG_INF)
            merged = torch.cat((fin_scores, norm), dim=1)  # (B, K + n)
            keep = merged.topk(k_max, dim=1).indices  # (B, K)
            fin_scores = merged.gather(1, keep)
            fin_logp = torch.cat((fin_logp, top.masked_fill(~new_fin, NEG_INF)), dim=1).gather(1, keep)
            fin_len = torch.cat((fin_len, torch.full_like(tok, gen_len)), dim=1).gather(1, keep)
            fin_tokens = _gather_rows(torch.cat((fin_tokens, _pad_to(seqs, max_new_tokens, ids.pad)), dim=1), keep)
            if st.attention is not None:
                parent_rows = arange_b[:, None] * k + beam  # (B, n)
                hist = st.attention[parent_rows][:, :, None]  # (B, n, 1, L, H, S)
                if run_attn is not None:
                    hist = torch.cat((_gather_rows(run_attn, beam), hist), dim=2)
                hist = _pad_to(hist, max_new_tokens, 0.0)  # (B, n, T, L, H, S)
                if fin_attn is None:
                    fin_attn = hist.new_zeros((b, k_max, *hist.shape[2:]))
                fin_attn = _gather_rows(torch.cat((fin_attn, hist), dim=1), keep)

        # the next step's beams: the K best continuations that do not end
        going = top.masked_fill(ends, NEG_INF)
        if n < k_max:  # a vocabulary smaller than the beam: fill with dead beams
            fill = k_max - n
            going = torch.cat((going, going.new_full((b, fill), NEG_INF)), dim=1)
            beam = torch.cat((beam, beam.new_zeros((b, fill))), dim=1)
            tok = torch.cat((tok, tok.new_full((b, fill), ids.pad)), dim=1)
        run_scores, pos = going.topk(k_max, dim=1)  # (B, K)
        parent = beam.gather(1, pos)
        rows = (arange_b[:, None] * k + parent).view(-1)  # (B K,) row of each new beam's parent
        run_tokens = torch.cat((run_tokens.view(b * k, -1)[rows].view(b, k_max, -1), tok.gather(1, pos)[..., None]),
                               dim=2)
        if st.attention is not None:
            new_rows = st.attention[rows].view(b, k_max, 1, *st.attention.shape[1:])
            run_attn = new_rows if run_attn is None else \
                torch.cat((run_attn.view(b * k, *run_attn.shape[2:])[rows].view(b, k_max, *run_attn.shape[2:]),
                           new_rows), dim=2)
        expanding = k != k_max  # the first step: one row per sentence becomes K
        if use_cache:
            cache = model.reorder_cache(st.cache, rows, cross=expanding)
        if expanding:
            memory = memory.index_select(0, rows)
            mask = None if mask is None else mask.index_select(0, rows)

        # can a running beam still beat the worst finished hypothesis?
        bound_len = max_new_tokens if (early_stopping == "never" and length_penalty > 0) else gen_len
        best_possible = run_scores[:, 0] / float(bound_len) ** length_penalty
        full = (fin_scores > NEG_INF).all(dim=1)
        worst = torch.where(full, fin_scores.min(dim=1).values, torch.full_like(best_possible, NEG_INF))
        still_open &= best_possible > worst
        if not bool(still_open.any()) or (early_stopping is True and bool(full.all())):
            break
        n_closed = b - int(still_open.sum())
        if n_closed and 4 * n_closed >= b:  # closed sentences leave the batch
            closed = (~still_open).nonzero().squeeze(1)
            result.take(sent[closed], fin_tokens[closed], fin_logp[closed], fin_scores[closed], fin_len[closed],
                        None if fin_attn is None else fin_attn[closed])
            keep = still_open.nonzero().squeeze(1)
            sent, still_open = sent[keep], still_open[keep]
            run_tokens, run_scores = run_tokens[keep], run_scores[keep]
            fin_tokens, fin_scores = fin_tokens[keep], fin_scores[keep]
            fin_logp, fin_len = fin_logp[keep], fin_len[keep]
            run_attn = None if run_attn is None else run_attn[keep]
            fin_attn = None if fin_attn is None else fin_attn[keep]
            rows = (keep[:, None] * k_max + torch.arange(k_max, device=dev)).view(-1)  # whole sentences, in order
            memory = memory.index_select(0, rows)
            mask = None if mask is None else mask.index_select(0, rows)
            if use_cache:
                cache = model.reorder_cache(cache, rows)
            b = len(keep)
            arange_b = torch.arange(b, device=dev)

    result.take(sent, fin_tokens, fin_logp, fin_scores, fin_len, fin_attn)
    return result.hypotheses()


class _Best:
    """The best finished hypothesis of each sentence, filled in as sentences leave the batch."""

    def __init__(self, b: int, max_new_tokens: int, pad: int, dev, fdt):
        self.tokens = torch.full((b, max_new_tokens), pad, dtype=torch.long, device=dev)
        self.log_probs = torch.full((b,), NEG_INF, device=dev, dtype=fdt)
        self.scores = torch.full((b,), NEG_INF, device=dev, dtype=fdt)
        self.lengths = torch.zeros(b, dtype=torch.long, device=dev)
        self.attention: Tensor | None = None  # (B, T, L, H, S)

    def take(self, sent: Tensor, tokens, log_probs, scores, lengths, attention) -> None:
        """Sentences ``sent`` (n,) with their finished hypotheses, best first: tokens (n, K, T), ... (n, K)."""
        self.tokens[sent], self.log_probs[sent], self.scores[sent] = tokens[:, 0], log_probs[:, 0], scores[:, 0]
        self.lengths[sent] = lengths[:, 0]
        if attention is not None:
            if self.attention is None:
                self.attention = attention.new_zeros((self.tokens.shape[0], *attention.shape[2:]))
            self.attention[sent] = attention[:, 0]

    def hypotheses(self) -> Hypotheses:
        return Hypotheses(self.tokens, self.log_probs, self.scores, self.lengths, self.attention)
