"""One-pass decoding of a NAT model trained with CTC (``NATConfig.nat_loss == "ctc"``).

    out = ctc_decode(model, input_ids, attention_mask)
    out.sequences         # (B, 1 + T + 1): start token, tokens, END, pad (``generate``'s layout)

The decoder gets ``ctc_upsample`` x S mask tokens (S source tokens), writes every position at once, each
position its most likely token or the blank (the pad id); the row collapses as CTC's does (``ctc.collapse``:
repeats merged, then blanks dropped), so the length comes out of the alignment: no length classifier, no
candidates, no iterations. The model is reached through the ``mask_predict`` protocol (``encode``,
``decode_parallel``, ``output_logits``, ``config``), so ``inference.NATEngine`` decodes it as the model does.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..functional.masks import keep_positions
from ..functional.tokens import best_tokens
from ..models.nat import ctc_row_lengths
from .ctc import collapse
from .mask_predict import NATOutput, check_sources

__all__ = ["ctc_decode"]


def _check(model, input_ids, attention_mask, suppress_tokens) -> list[int]:
    cfg = getattr(model, "config", None)
    if getattr(cfg, "nat_loss", None) != "ctc" or not callable(getattr(model, "decode_parallel", None)):
        raise ValueError(f"ctc_decode: {type(model).__name__} is not a NAT model trained with CTC "
                         "(nat_loss='ctc'); decode other NAT models with attnkit.generation.mask_predict")
    check_sources("ctc_decode", input_ids, attention_mask)
    extra = list(suppress_tokens or ())
    if not all(isinstance(i, int) and 0 <= i < cfg.tgt_vocab_size and i != cfg.blank_id for i in extra):
        raise ValueError(f"ctc_decode: `suppress_tokens` must be token ids in [0, {cfg.tgt_vocab_size}) other than "
                         f"the blank {cfg.blank_id}, got {extra}")
    return extra


@torch.no_grad()
def ctc_decode(model, input_ids: Tensor, attention_mask: Tensor | None = None, *,
               suppress_tokens: list[int] | None = None) -> NATOutput:
    """Decode a CTC-trained NAT ``model`` from sources input_ids (B, S) in one pass (see the module doc).

    ``attention_mask`` (B, S): 1 = real token. ``suppress_tokens``: ids never written (the mask token and END,
    never CTC targets, are not written anyway). ``sequences_scores``: the mean log-probability of each row's
    best labels (blanks included); ``candidate_lengths`` (B, 1): the row lengths. Call ``model.eval()`` first.
    """
    cfg = model.config
    extra = _check(model, input_ids, attention_mask, suppress_tokens)
    if attention_mask is not None and bool(attention_mask.all()):
        attention_mask = None  # no padding: the no-mask path
    b, dev = input_ids.shape[0], input_ids.device
    memory = model.encode(input_ids, attention_mask)  # (B, S, d)
    src_len = input_ids.new_full((b,), input_ids.shape[1]) if attention_mask is None else attention_mask.sum(1)
    rows = ctc_row_lengths(src_len, cfg)  # (B,)
    width = int(rows.max()) if b else 0
    full = bool((rows == width).all())
    tokens = torch.full((b, width), cfg.mask_id, dtype=torch.long, device=dev)  # (B, W) the row of mask tokens
    if not full:
        tokens = tokens.masked_fill(~keep_positions(rows, width), cfg.pad_token_id)
    hidden = model.decode_parallel(tokens, memory, attention_mask, None if full else rows).last_hidden_state
    bad = torch.tensor(sorted({cfg.mask_id, cfg.eos_token_id, *extra} - {cfg.blank_id}), dtype=torch.long, device=dev)
    logp, best = best_tokens(model.output_logits(hidden.reshape(b * width, -1)), bad)  # (B W,), (B W,)
    logp, best = logp.view(b, width), best.view(b, width)
    real = keep_positions(rows, width)  # (B, W)
    scores = (logp * real).sum(1) / rows.clamp(min=1)  # (B,)
    return _output(cfg, [collapse(r[:n], cfg.blank_id) for r, n in zip(best.cpu(), rows.tolist())], scores,
                   rows, dev)


def _output(cfg, labels: list[list[int]], scores: Tensor, rows: Tensor, dev) -> NATOutput:
    """Collapsed label rows -> ``generate``'s layout: start token, tokens, END, pad -> (B, 1 + T + 1)."""
    b, t = len(labels), max((len(x) for x in labels), default=0)
    seq = torch.full((b, t + 2), cfg.pad_token_id, dtype=torch.long)
    seq[:, 0] = cfg.start_token_id
    for i, x in enumerate(labels):
        seq[i, 1:1 + len(x)] = torch.tensor(x, dtype=torch.long)
        seq[i, 1 + len(x)] = cfg.eos_token_id
    lengths = torch.tensor([len(x) + 1 for x in labels], dtype=torch.long)  # tokens + END
    return NATOutput(seq.to(dev), scores, lengths.to(dev), rows[:, None])
