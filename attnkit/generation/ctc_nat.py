"""One-pass decoding of a NAT model trained with CTC (``NATConfig.nat_loss == "ctc"``).

    out = ctc_decode(model, input_ids, attention_mask)
    out.sequences         # (B, 1 + T + 1): start token, tokens, END, pad (``generate``'s layout)

The decoder gets ceil(``ctc_upsample`` x S) mask tokens (S source tokens), writes every position at once, each
position its most likely token or the blank (the pad id; ``blank_penalty`` is taken off the blank's logit
first: > 0 writes longer translations); the row collapses as CTC's does (``ctc.collapse``:
repeats merged, then blanks dropped; here the whole batch at once), so the length comes out of the alignment: no
length classifier, no candidates, no iterations. Only the rows' own positions go through the output layer. The
model is reached through the ``mask_predict`` protocol (``encode``, ``decode_parallel``, ``output_logits``,
``config``), so ``inference.NATEngine`` decodes it as the model does; one unpadded sentence on an engine takes its
``first_pass`` (encoder, row, decoder, output layer and best labels in one native call).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..functional.masks import keep_positions
from ..models.nat import ctc_row_length, ctc_row_lengths
from ..nn.decoding_ranges import CTC_NAT
from .ctc import collapse
from .mask_predict import NATOutput, best_of_hidden, check_sources

__all__ = ["ctc_decode", "RANGES"]

RANGES = CTC_NAT  # the command line's too

LIST_UP_TO = 256  # labels (B x W) up to which the rows collapse as Python lists


def _check(model, input_ids, attention_mask, suppress_tokens, blank_penalty) -> list[int]:
    cfg = getattr(model, "config", None)
    if getattr(cfg, "nat_loss", None) != "ctc" or not callable(getattr(model, "decode_parallel", None)):
        raise ValueError(f"ctc_decode: {type(model).__name__} is not a NAT model trained with CTC "
                         "(nat_loss='ctc'); decode other NAT models with attnkit.generation.mask_predict")
    check_sources("ctc_decode", input_ids, attention_mask)
    RANGES["blank_penalty"].check(blank_penalty, "ctc_decode: `blank_penalty`")
    extra = list(suppress_tokens or ())
    if not all(isinstance(i, int) and 0 <= i < cfg.tgt_vocab_size and i != cfg.blank_id for i in extra):
        raise ValueError(f"ctc_decode: `suppress_tokens` must be token ids in [0, {cfg.tgt_vocab_size}) other than "
                         f"the blank {cfg.blank_id}, got {extra}")
    return extra


@torch.no_grad()
def ctc_decode(model, input_ids: Tensor, attention_mask: Tensor | None = None, *,
               suppress_tokens: list[int] | None = None, blank_penalty: float = 0.0) -> NATOutput:
    """Decode a CTC-trained NAT ``model`` from sources input_ids (B, S) in one pass (see the module doc).

    ``attention_mask`` (B, S): 1 = real token. ``suppress_tokens``: ids never written (the mask token and END,
    never CTC targets, are not written anyway). ``sequences_scores``: the mean log-probability of each row's
    best labels (blanks included); ``candidate_lengths`` (B, 1): the row lengths. ``blank_penalty`` (in
    [-100, 100], default 0): subtracted from the blank's logit before each position's choice, so that more
    positions write a token (> 0: longer translations; the scores are then of the shifted distribution); choose it
    on a validation set. Call ``model.eval()`` first.
    """
    cfg = model.config
    extra = _check(model, input_ids, attention_mask, suppress_tokens, blank_penalty)
    if attention_mask is not None and bool(attention_mask.all()):
        attention_mask = None  # no padding: the no-mask path
    b, dev = input_ids.shape[0], input_ids.device
    shift = (cfg.blank_id, -float(blank_penalty)) if blank_penalty else None
    bad = _never(cfg, tuple(extra), dev)
    first = getattr(model, "first_pass", None) if b == 1 and attention_mask is None else None
    got = first(input_ids, bad, shift=shift) if callable(first) else None  # an engine's one call: (1, W) each
    if got is not None:
        _, rows, best, logp, _ = got
        rows = rows[:, 0]  # (1,) the row
        return _output(cfg, best, logp.sum(1) / rows, rows)
    memory = model.encode(input_ids, attention_mask)  # (B, S, d)
    if attention_mask is None:  # every row of one length: ctc_row_lengths of S, in Python
        width = ctc_row_length(input_ids.shape[1], cfg)
        rows, real = input_ids.new_full((b,), width), None
    else:
        rows = ctc_row_lengths(attention_mask.sum(1), cfg)  # (B,), each >= 1
        width = int(rows.max()) if b else 0
        real = None if bool((rows == width).all()) else keep_positions(rows, width)  # (B, W), None: every position
    logp, best = _best_labels(model, memory, attention_mask, rows, width, real, bad, shift)
    scores = logp.sum(1) / rows  # (B,) the mean over each row's positions
    return _output(cfg, best, scores, rows)


def _best_labels(model, memory: Tensor, memory_mask: Tensor | None, rows: Tensor, width: int, real: Tensor | None,
                 bad: Tensor, shift: tuple[int, float] | None) -> tuple[Tensor, Tensor]:
    """The batch's rows (B,) in one decoder pass, padded to the longest, ``width`` (``real`` (B, W) their positions,
    None: all) -> each position's log-probability and best label, (B, W) each, 0 and the blank past a row; only the
    rows' positions go through the output layer."""
    cfg, b, dev = model.config, rows.shape[0], rows.device
    tokens = torch.full((b, width), cfg.mask_id, dtype=torch.long, device=dev)  # (B, W) the row of mask tokens
    if real is not None:
        tokens = tokens.masked_fill(~real, cfg.pad_token_id)
    hidden = model.decode_parallel(tokens, memory, memory_mask, None if real is None else rows).last_hidden_state
    if real is None:  # every position: (B W,) -> (B, W)
        logp, best = best_of_hidden(model, hidden.reshape(b * width, -1), bad, shift)
        return logp.view(b, width), best.view(b, width)
    got = best_of_hidden(model, hidden[real], bad, shift)  # (N,), (N,) N = rows.sum()
    logp = got[0].new_zeros(b, width).masked_scatter_(real, got[0])
    return logp, torch.full((b, width), cfg.blank_id, dtype=torch.long, device=dev).masked_scatter_(real, got[1])


def _never(cfg, extra: tuple[int, ...], dev) -> Tensor:
    """The ids a CTC row never writes: the mask token, END and ``extra`` (not the blank) -> (n,) int64, sorted."""
    return torch.tensor(sorted({cfg.mask_id, cfg.eos_token_id, *extra} - {cfg.blank_id}), dtype=torch.long, device=dev)


def _output(cfg, best: Tensor, scores: Tensor, rows: Tensor) -> NATOutput:
    """Each row's labels best (B, W) (blank past the row) collapsed as ``ctc.collapse`` does (a label is kept where
    it is not the blank and differs from the label before it), in ``generate``'s layout: start token, tokens, END,
    pad -> (B, 1 + T + 1), for the whole batch at once (a few rows: row by row, ``ctc.collapse``)."""
    b, dev = best.shape[0], best.device
    if best.numel() <= LIST_UP_TO:  # a few rows: Python lists, a few calls instead of twenty whole-batch operations
        labels = [collapse(r, cfg.blank_id) for r in best.tolist()]  # the blank past a row drops out
        t = max((len(x) for x in labels), default=0)
        seq = [[cfg.start_token_id, *x, cfg.eos_token_id] + [cfg.pad_token_id] * (t - len(x)) for x in labels]
        lengths = torch.tensor([len(x) + 1 for x in labels], dtype=torch.long, device=dev)
        return NATOutput(torch.tensor(seq, dtype=torch.long, device=dev).view(b, t + 2), scores, lengths, rows[:, None])
    before = torch.cat((best.new_full((b, 1), -1), best[:, :-1]), dim=1)  # (B, W) the label before, -1 at 0
    keep = (best != cfg.blank_id) & (best != before)  # (B, W) the labels kept
    n = keep.sum(1)  # (B,) tokens of each row
    t = int(n.max()) if b else 0
    seq = torch.full((b, t + 2), cfg.pad_token_id, dtype=torch.long, device=dev)
    seq[:, 0] = cfg.start_token_id
    where = keep.cumsum(1)  # (B, W) a kept label's place after the start token
    seq[torch.arange(b, device=dev)[:, None].expand_as(keep)[keep], where[keep]] = best[keep]
    seq[torch.arange(b, device=dev), n + 1] = cfg.eos_token_id
    return NATOutput(seq, scores, n + 1, rows[:, None])  # lengths: tokens + END
