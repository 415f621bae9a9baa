"""The decoding loop of one token per step (greedy or sampled), and what every loop shares.

The loops (this one, ``beam.beam_search``, ``ctc``'s joint search) ask the model for one step at a time
(``protocol.EncoderDecoder``, ``_step``) and keep the decoder's K/V cache between steps. They return
``Hypotheses``: the generated tokens (without the start token, pad after END), the model's log-probability of
each, its length-penalised score and, when asked, the cross-attention of every generated token. This loop also
shows each step to a hook (``OnStep``), which may force its token: ``steps`` records a walk for its page so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from .logits import constrain, sample, warp
from .protocol import TokenIds

__all__ = ["Hypotheses", "greedy_or_sample", "OnStep"]

OnStep = Callable[[int, Tensor, Tensor, Tensor], "Tensor | None"]
"""``on_step(step, rows, logp, chosen)``, called by ``greedy_or_sample`` after each step's choice: ``step`` (0 = the
first new token), the sentence of each row still in the batch (rows,), their log-probabilities after ``constrain``
(rows, V) and the tokens chosen (rows,). A row whose sentence has ended is among them until the batch drops it. It
returns None, or other tokens (rows,) to write instead (a walk that forces a token at a step)."""


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


def _choose(logp: Tensor, do_sample: bool, temperature: float, top_k: int | None, top_p: float,
            generator: torch.Generator | None) -> Tensor:
    """Each row's next token from logp (rows, V): a sample of the warped distribution, or the most likely one."""
    if do_sample:
        return sample(warp(logp, temperature=temperature, top_k=top_k, top_p=top_p), generator)
    return logp.argmax(dim=-1)


def greedy_or_sample(model, memory, mask, ids: TokenIds, *, max_new_tokens: int, min_new_tokens: int,
                     suppress: Tensor | None, use_cache: bool, output_attentions: bool, length_penalty: float,
                     do_sample: bool = False, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float = 1.0, generator: torch.Generator | None = None,
                     forced_eos: int | None = None, renormalize: bool = False, on_step: OnStep | None = None
                     ) -> Hypotheses:
    """One token per step for each of the B sentences: the most likely one, or a sample.

    Finished sentences leave the batch (their rows of memory, mask and cache are dropped) once they are a
    quarter of the rows still decoding or more: a smaller batch per step, at the price of one cache copy.
    ``on_step``: see ``OnStep`` (what a step-by-step view records, and the tokens it forces).
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
        first = step if use_cache and cache is not None else 0  # with a cache the new token only, else the prefix
        inp = out[:, first:step + 1] if every else out[rows, first:step + 1]
        logp, cache, attn = _step(model, inp, memory, mask, cache, use_cache, output_attentions)
        logp = constrain(logp, step=step, eos_token_id=ids.eos, min_new_tokens=min_new_tokens, suppress=suppress,
                         force=None if forced_eos is None else (max_new_tokens - 1, forced_eos),
                         renormalize=renormalize)
        nxt = _choose(logp, do_sample, temperature, top_k, top_p, generator)  # (rows,)
        if on_step is not None:
            nxt = _forced(on_step(step, rows, logp, nxt), nxt)
        _write(out, log_probs, lengths, step, nxt, logp.gather(1, nxt[:, None]).view(-1), rows, done,
               n_done == 0 and every)
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


def _forced(given: Tensor | None, chosen: Tensor) -> Tensor:
    """The tokens an ``on_step`` hook returned (rows,), checked, or ``chosen`` when it returned None."""
    if given is None:
        return chosen
    if not isinstance(given, Tensor) or given.shape != chosen.shape:
        got = tuple(given.shape) if isinstance(given, Tensor) else type(given).__name__
        raise ValueError(f"greedy_or_sample: `on_step` must return None or a token per row {tuple(chosen.shape)}, "
                         f"got {got}")
    return given.to(chosen.device, torch.long)


def _write(out: Tensor, log_probs: Tensor, lengths: Tensor, step: int, nxt: Tensor, chosen: Tensor, rows: Tensor,
           done: Tensor, plain: bool) -> None:
    """Step ``step``'s tokens nxt (rows,) and their log-probabilities ``chosen`` (rows,) into the sentences' rows
    of ``out`` (B, 1 + T), ``log_probs`` (B,) and ``lengths`` (B,); ``plain``: no row has ended and rows is still
    arange(B) (the same updates, without indexing)."""
    if plain:
        out[:, step + 1] = nxt
        log_probs += chosen
        lengths += 1
        return
    live = ~done
    out[rows[live], step + 1] = nxt[live]  # nothing after END: finished rows keep their padding
    log_probs[rows] += chosen.masked_fill(done, 0.0)
    lengths[rows] += live.long()
