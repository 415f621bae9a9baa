"""The best allowed token of each row of logits, and its log-probability: a NAT pass's choice at every position.

    logp, ids = best_tokens(logits, suppressed)   # logits (M, V), suppressed (n,) ids never chosen

The reference is three torch ops, ``log_softmax`` (over every token), ``index_fill`` of the suppressed
ids with -inf, ``max``; the native kernel (``best_tokens.h``: float32 or bfloat16 logits on any CPU,
inference) makes one pass over a row plus one of exps (their times: docs/design.md).
Log-probabilities are float32 for float32 and
bfloat16 logits (float64 for float64), the softmax computed in float32 either way. The kernel
leaves to the reference the rows it does not decide (a NaN or +inf, all -inf, nothing allowed), so both
paths give the same ids and, to float rounding, the same log-probabilities.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import native

__all__ = ["best_tokens"]


def _reference(logits: Tensor, suppressed: Tensor) -> tuple[Tensor, Tensor]:
    wide = torch.promote_types(logits.dtype, torch.float32)
    best, ids = logits.to(wide).log_softmax(dim=-1).index_fill_(-1, suppressed, float("-inf")).max(dim=-1)
    return best, ids


def best_tokens(logits: Tensor, suppressed: Tensor) -> tuple[Tensor, Tensor]:
    """logits (M, V), suppressed (n,) int64 token ids -> (logp (M,), ids (M,) int64): for each row the first
    largest logit outside ``suppressed`` and its log-probability under a softmax over all V tokens (logp in
    float32, or float64 for float64 logits)."""
    if logits.dim() != 2:
        raise ValueError(f"best_tokens: `logits` must be (M, V), got shape {tuple(logits.shape)}")
    kernel = native.kernel()
    if (kernel is None or logits.device.type != "cpu" or logits.dtype not in (torch.float32, torch.bfloat16)
            or (torch.is_grad_enabled() and logits.requires_grad)):
        return _reference(logits, suppressed)
    given = suppressed.tolist()
    ids = sorted(set(given))  # a few ids: sorted and distinct, as the kernel takes them
    if ids and (ids[0] < 0 or ids[-1] >= logits.shape[1]):
        raise ValueError(f"best_tokens: `suppressed` ids must be in [0, {logits.shape[1]}), got {ids}")
    same = ids == given and suppressed.dtype == torch.long and suppressed.device.type == "cpu"
    bad = suppressed.contiguous() if same else torch.tensor(ids, dtype=torch.long)
    logp, ids = kernel.best_tokens(logits.contiguous(), bad)
    if ids.numel() and int(ids.min()) < 0:  # rows the kernel leaves to the reference (id -1)
        odd = ids < 0
        logp[odd], ids[odd] = _reference(logits[odd], bad)
    return logp, ids
