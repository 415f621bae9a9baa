"""What happens to one step's scores before a token is chosen: pure functions on (rows, V) tensors.

- ``constrain``: hard rules on log-probabilities (no END before ``min_new_tokens``; suppressed ids; a token
  forced at a step),
  applied in every decoding mode. Banned entries become -inf; the others are left as they are, so the
  sum of the chosen entries stays the model's own log-probability of the sequence.
- ``warp``: sampling's reshaping of the distribution, in Hugging Face's order: temperature, then top-k,
  then top-p (nucleus: the smallest set of most likely tokens whose probability reaches p).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["constrain", "warp"]

NEG_INF = float("-inf")


def constrain(logp: Tensor, *, step: int, eos_token_id: int, min_new_tokens: int = 0,
              suppress: Tensor | None = None, force: tuple[int, int] | None = None,
              renormalize: bool = False) -> Tensor:
    """logp (rows, V) at generated position ``step`` (0 = the first new token) -> (rows, V), banned ids at -inf.
    ``force`` (step, id): at that step every id but this one is banned and it scores 0 (Hugging Face's
    ``forced_eos_token_id`` at the last step). ``renormalize``: the allowed ids' log-probabilities normalised
    again to sum to 1 (Hugging Face's ``renormalize_logits``)."""
    if step < min_new_tokens:
        logp.select(1, eos_token_id).fill_(NEG_INF)
    if suppress is not None and suppress.numel():
        logp.index_fill_(1, suppress, NEG_INF)
    if force is not None and step == force[0]:
        logp.fill_(NEG_INF).select(1, force[1]).fill_(0.0)
    return logp.log_softmax(-1) if renormalize else logp


def warp(logp: Tensor, *, temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0) -> Tensor:
    """Log-probabilities (rows, V) -> unnormalised log-weights (rows, V) to sample from (-inf = never).

    top_k keeps the k largest entries (ties at the k-th value kept too); top_p keeps, in order of
    probability, every token until their total reaches ``top_p`` (always at least one).
    """
    x = logp / temperature if temperature != 1.0 else logp.clone()
    if top_k is not None and 0 < top_k < x.shape[-1]:
        kth = x.topk(top_k, dim=-1).values[:, -1:]  # (rows, 1)
        x = x.masked_fill(x < kth, NEG_INF)
    if top_p < 1.0:
        sorted_x, order = x.sort(dim=-1, descending=True)  # (rows, V)
        probs = sorted_x.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # probability of the strictly more likely tokens
        drop_sorted = before >= top_p
        drop_sorted[:, 0] = False
        x = x.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), NEG_INF)
    return x


def sample(weights: Tensor, generator: torch.Generator | None) -> Tensor:
    """One token per row from log-weights (rows, V) -> (rows,) int64."""
    return torch.multinomial(weights.softmax(dim=-1), 1, generator=generator).squeeze(1)
