"""Non-autoregressive decoding: one pass, or Mask-Predict's iterative refinement (Ghazvininejad et al. 2019).

    out = mask_predict(model, input_ids, attention_mask, iterations=10, length_candidates=3)
    out.sequences         # (B, 1 + T): start token, tokens, END, pad (``generate``'s layout)

1. The length: the model's classifier proposes ``length_candidates`` lengths per sentence (each is
   decoded, in one batch), or, for a model that cuts at END, one long row.
2. Iteration 1: every position is the mask token (the lecture's row of start tokens); the decoder
   predicts all of them at once, each position its most likely token and that token's probability.
   With ``iterations=1`` this is the one-pass NAT.
3. Iteration t = 2..N: the n = T (N - t + 1) / N least confident tokens are masked again and predicted
   from the others; only the re-masked positions change (token and probability).
4. Each candidate's score is the mean log-probability of its tokens; the best candidate wins. A model
   that cuts at END keeps the tokens before the first END.

The model is reached only through ``models.nat.is_nat``'s protocol: ``encode``, ``decode_parallel``,
``length_candidates`` / ``row_lengths`` and ``config`` (pad, END, mask ids, ``length``). A model may also
give ``first_pass(input_ids, suppressed, use_cache=)``, steps 1 and 2 for one unpadded sentence and one
length in one call (``inference.NATEngine``'s, for latency at batch 1), or None to leave them here, and
``cross_cache(memory)`` (the cross-attention's keys and values of every layer, as ``decode_parallel``'s
``cache``): then each sentence's memory is projected once for its length candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional.masks import keep_positions
from ..functional.tokens import best_tokens
from ..nn import LayerCache
from ..nn.decoding_ranges import MASK_PREDICT

__all__ = ["mask_predict", "NATOutput", "RANGES", "best_of_hidden"]

RANGES = MASK_PREDICT  # the command line's too
CHUNK_LOGITS = 1 << 19  # logits of one chunk of rows in ``best_of_hidden``: a chunk's logits stay in cache


@dataclass
class NATOutput:
    sequences: Tensor  # (B, 1 + T)
    sequences_scores: Tensor  # (B,) mean log-probability of the chosen translation's tokens
    lengths: Tensor  # (B,) generated tokens, END included
    candidate_lengths: Tensor  # (B, k) the lengths tried, best first by the classifier (k = 1 for "end")


def check_sources(who: str, input_ids, attention_mask) -> None:
    """A NAT decoder's sources: input_ids a (B, S) integer tensor, attention_mask None or of its shape; else a
    one-line ValueError naming ``who`` and the argument."""
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2 or input_ids.dtype not in (torch.int64, torch.int32):
        got = f"{input_ids.dtype} {tuple(input_ids.shape)}" if isinstance(input_ids, Tensor) else type(input_ids)
        raise ValueError(f"{who}: `input_ids` must be a (B, S) integer tensor, got {got}")
    if attention_mask is not None and (not isinstance(attention_mask, Tensor)
                                       or attention_mask.shape != input_ids.shape):
        raise ValueError(f"{who}: `attention_mask` must have the shape of input_ids {tuple(input_ids.shape)}")


def _check(model, input_ids, attention_mask, iterations, length_candidates) -> None:
    if not (callable(getattr(model, "decode_parallel", None)) and hasattr(getattr(model, "config", None), "mask_id")):
        raise ValueError(f"mask_predict: {type(model).__name__} is not a non-autoregressive model (no parallel "
                         "decoder or length prediction); decode autoregressive models with attnkit.generation.generate")
    if getattr(model.config, "nat_loss", None) == "ctc":
        raise ValueError("mask_predict: this model was trained with CTC (nat_loss='ctc'): it decodes in one pass, "
                         "the length from the alignment; use attnkit.generation.ctc_nat.ctc_decode")
    check_sources("mask_predict", input_ids, attention_mask)
    for name, v in (("iterations", iterations), ("length_candidates", length_candidates)):
        RANGES[name].check(v, f"mask_predict: `{name}`")
    if length_candidates > 1 and model.config.length != "classifier":
        raise ValueError(f"mask_predict: `length_candidates` ({length_candidates}) needs a length classifier; this "
                         "model writes one long row and cuts it at END (length='end')")


def _suppressed(cfg, extra, device) -> Tensor:
    """Ids never written: pad, the mask token, any ``extra`` ids, and END when the length is given -> (n,) int64."""
    extra = tuple(extra or ())
    if extra and not all(isinstance(i, int) and 0 <= i < cfg.tgt_vocab_size for i in extra):
        raise ValueError(f"mask_predict: `suppress_tokens` must be token ids in [0, {cfg.tgt_vocab_size}), "
                         f"got {list(extra)}")
    key = (id(cfg), extra, device)  # by identity: hashing a config hashes every field, at every call
    hit = _SUPPRESSED.get(key)
    if hit is None or hit[0] is not cfg:
        if len(_SUPPRESSED) >= 64:
            _SUPPRESSED.clear()
        hit = _SUPPRESSED[key] = (cfg, _suppressed_ids(cfg, extra, device))
    return hit[1]


_SUPPRESSED: dict = {}  # (id(config), extra ids, device) -> (config, ids): the config kept, so its id stays its own


def _suppressed_ids(cfg, extra: tuple[int, ...], device) -> Tensor:
    """``_suppressed``'s ids as a tensor (only read by the caller)."""
    ids = {cfg.pad_token_id, cfg.mask_id, *extra}
    if cfg.length == "classifier":
        ids.add(cfg.eos_token_id)
    return torch.tensor(sorted(ids), dtype=torch.long, device=device)


def best_of_hidden(model, hidden: Tensor, bad: Tensor, shift: tuple[int, float] | None = None
                   ) -> tuple[Tensor, Tensor]:
    """Decoder states hidden (M, d) -> (log-probability (M,), token (M,)) of each row's best token outside ``bad``:
    ``best_tokens(model.output_logits(hidden), bad)`` (each row's own), over chunks of rows of at most
    ``CHUNK_LOGITS`` logits, so that the choice reads a chunk's logits from cache right after the output layer
    wrote them (a batch's (M, V) logits are tens of MB). ``shift`` (id, x): x added to that token's logit first
    (the log-probabilities are then the shifted distribution's)."""

    def best(h: Tensor) -> tuple[Tensor, Tensor]:
        logits = model.output_logits(h)  # (m, V)
        if shift is not None:
            logits[:, shift[0]] += shift[1]
        return best_tokens(logits, bad)

    step = max(1, CHUNK_LOGITS // max(1, model.config.tgt_vocab_size))
    if hidden.shape[0] <= step:
        return best(hidden)
    parts = [best(h) for h in hidden.split(step)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


@dataclass
class _Rows:
    """The rows being decoded, R = B x candidates: their memory (R, S, d) and mask, lengths (R,), tokens (R, T) and
    each token's log-probability (R, T), where the rows are (``real``, (R, T), None: every position), and the
    projected memory the iterations reuse (``cache``)."""

    memory: Tensor
    mask: Tensor | None
    cands: Tensor  # (B, k) the length candidates
    lengths: Tensor
    width: int
    tokens: Tensor | None
    logp: Tensor | None
    cache: list | None
    real: Tensor | None
    every: bool
    done: int  # iterations already made (the model's own first pass: 1)


@torch.no_grad()
def mask_predict(model, input_ids: Tensor, attention_mask: Tensor | None = None, *, iterations: int = 10,
                 length_candidates: int | None = None, suppress_tokens: list[int] | None = None) -> NATOutput:
    """Decode a non-autoregressive ``model`` (``models.NATModel``) from sources input_ids (B, S); see the module doc.

    ``attention_mask`` (B, S): 1 = real token. ``length_candidates``: default 3 with a length classifier, 1
    for a model that cuts at END. ``suppress_tokens``: ids never written (pad, the mask
    token and, with a length classifier, END are never written anyway). Call ``model.eval()`` first.
    """
    cfg = getattr(model, "config", None)
    if length_candidates is None:
        length_candidates = 3 if getattr(cfg, "length", None) == "classifier" else 1
    _check(model, input_ids, attention_mask, iterations, length_candidates)
    if attention_mask is not None and bool(attention_mask.all()):
        attention_mask = None  # no padding: every step below takes its no-mask path
    bad = _suppressed(cfg, suppress_tokens, input_ids.device)
    rows = _rows(model, input_ids, attention_mask, bad, iterations, length_candidates)
    for it in range(rows.done, iterations):
        _iterate(model, rows, it, iterations, bad)
    return _output(cfg, rows, input_ids.shape[0])


def _rows(model, input_ids: Tensor, attention_mask: Tensor | None, bad: Tensor, iterations: int, k: int) -> _Rows:
    """The rows to decode: the encoder's memory, the length candidates (each a row of its own) and the rows'
    tokens, the first pass made where the model makes it itself (one unpadded sentence, one length)."""
    cfg, b, dev = model.config, input_ids.shape[0], input_ids.device
    first = None  # the model's own first pass, where it has one (one unpadded sentence, one length)
    if callable(getattr(model, "first_pass", None)) and attention_mask is None and k == 1 \
            and cfg.length == "classifier":
        first = model.first_pass(input_ids, bad, use_cache=iterations > 1)
    if first is not None:
        memory, cands, tokens, logp_tok, cache = first
        lengths, width = cands.reshape(-1), tokens.shape[1]
    else:
        memory = model.encode(input_ids, attention_mask)  # (B, S, d)
        if cfg.length == "classifier":
            cands = model.length_candidates(memory, attention_mask, k)  # (B, k)
        else:
            cands = model.row_lengths(attention_mask, memory)[:, None]  # (B, 1)
        lengths = cands.reshape(-1)  # (R,), R = B k
        width = int(lengths.max()) if lengths.numel() else 0  # the longest row
    k, shared = cands.shape[1], None
    if k > 1:  # every candidate a row of its own
        rows = torch.arange(b, device=dev).repeat_interleave(k)  # (R,) source row of each candidate
        if first is None and callable(getattr(model, "cross_cache", None)):  # the memory projected once per sentence
            shared = [LayerCache(None, tuple(x.index_select(0, rows) for x in c.cross_kv))
                      for c in model.cross_cache(memory)]
        memory = memory.index_select(0, rows)  # (R, S, d)
        attention_mask = None if attention_mask is None else attention_mask.index_select(0, rows)
    every = lengths.numel() == 1 or bool((lengths == width).all())  # no padding: the first pass writes all (R, T)
    real = None if every else keep_positions(lengths, width)  # (R, T) True = a position of the row
    if first is None:
        tokens = torch.full((lengths.shape[0], width), cfg.mask_id, dtype=torch.long, device=dev)
        if real is not None:
            tokens = tokens.masked_fill(~real, cfg.pad_token_id)
        fdt = torch.promote_types(memory.dtype, torch.float32)  # scores in float32, or float64 for float64 models
        logp_tok = None if every else torch.zeros(lengths.shape[0], width, device=dev, dtype=fdt)  # (R, T) log-p
        cache = shared
    return _Rows(memory, attention_mask, cands, lengths, width, tokens, logp_tok, cache, real, every,
                 0 if first is None else 1)


def _iterate(model, r: _Rows, it: int, iterations: int, bad: Tensor) -> None:
    """Iteration ``it``: re-mask the least confident tokens (none at the first), predict the masked ones."""
    masked = r.real
    if it > 0:  # re-mask the n = T (N - it) / N least confident tokens
        n = (r.lengths * (iterations - it)) // iterations  # (R,)
        order = (r.logp if r.real is None else r.logp.masked_fill(~r.real, float("inf"))).argsort(dim=1)
        rank = order.argsort(dim=1)  # (R, T) rank of each position, least confident first
        masked = rank < n[:, None] if r.real is None else (rank < n[:, None]) & r.real
        r.tokens = r.tokens.masked_fill(masked, model.config.mask_id)
    out = model.decode_parallel(r.tokens, r.memory, r.mask, None if r.every else r.lengths, cache=r.cache,
                                use_cache=iterations > 1)
    if out.cache is not None:  # keep the projected memory for the next iterations, not the row
        r.cache = [LayerCache(None, c.cross_kv) for c in out.cache]
    hidden = out.last_hidden_state
    whole = it == 0 and r.every  # every position is masked: no gather, no scatter
    # (M,) M masked positions: the best allowed token, its log-prob (fdt)
    best, pred = best_of_hidden(model, hidden.reshape(-1, hidden.shape[-1]) if whole else hidden[masked], bad)
    if whole:
        r.tokens, r.logp = pred.view_as(r.tokens), best.view(r.tokens.shape)
    else:
        r.tokens = r.tokens.masked_scatter(masked, pred)
        r.logp = r.logp.masked_scatter(masked, best)


def _output(cfg, r: _Rows, b: int) -> NATOutput:
    """Each sentence's best candidate (the mean log-probability of its tokens) as ``generate``'s layout."""
    tokens, lengths, width, dev, k = r.tokens, r.lengths, r.width, r.tokens.device, r.cands.shape[1]
    # (R,) mean log-probability
    scores = r.logp.mean(1) if r.real is None else (r.logp * r.real).sum(1) / lengths.clamp(min=1)
    if k > 1:  # each sentence's best candidate
        chosen = torch.arange(b, device=dev) * k + scores.view(b, k).argmax(dim=1)  # (B,) its row
        tokens, lengths, scores = tokens[chosen], lengths[chosen], scores[chosen]  # (B, T), (B,), (B,)
    if cfg.length == "end":  # keep what comes before the first END
        is_end = (tokens == cfg.eos_token_id) & keep_positions(lengths, width)
        lengths = torch.where(is_end.any(1), is_end.float().argmax(1), lengths)  # (B,) the first END
    elif r.every:  # every row full: start, its tokens, END -> (B, 1 + T + 1)
        sequences = F.pad(tokens, (1, 1), value=cfg.start_token_id)  # (B, T) -> (B, 1 + T + 1)
        sequences[:, -1] = cfg.eos_token_id
        return NATOutput(sequences, scores, lengths + 1, r.cands)
    width = int(lengths.max()) if lengths.numel() else 0
    keep = keep_positions(lengths, width)  # (B, T)
    body = tokens[:, :width].masked_fill(~keep, cfg.pad_token_id)
    body = torch.cat((body, torch.full((b, 1), cfg.pad_token_id, dtype=torch.long, device=dev)), dim=1)
    body[torch.arange(b, device=dev), lengths] = cfg.eos_token_id  # END after the last token
    start = torch.full((b, 1), cfg.start_token_id, dtype=torch.long, device=dev)
    return NATOutput(torch.cat((start, body), dim=1), scores, lengths + 1, r.cands)
