"""Which examples go into which batch, per epoch: a pure function of the seed, the epoch and the sizes.

With ``lengths`` (one size per example) the shuffled examples are sorted by length in chunks of about
50 batches (bucketing: little padding, still random), then cut either into ``batch_size`` examples or,
with ``batch_tokens``, into batches of at most that many padded tokens (examples x longest). The
batches are shuffled again; under data parallelism every batch is split across the ``world`` processes
and each process takes its rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["epoch_batches", "token_batches"]


def token_batches(order: Sequence[int], lengths: Sequence[int], budget: int, min_size: int = 1) -> list[list[int]]:
    """Cut ``order`` into consecutive batches whose padded size (examples x longest) stays within ``budget``
    (a longer example alone still makes a batch), each holding at least ``min_size`` examples."""
    groups: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        grown = max(longest, lengths[i])
        if cur and (len(cur) + 1) * grown > budget and len(cur) >= min_size:
            groups.append(cur)
            cur, grown = [], lengths[i]
        cur.append(i)
        longest = grown
    if cur:
        groups.append(cur)
    return groups


def epoch_batches(n: int, lengths: Sequence[int] | None, *, batch_size: int, batch_tokens: int, seed: int,
                  epoch: int, world: int = 1, rank: int = 0) -> list[list[int]]:
    """Process ``rank``'s batches (lists of indices into n examples) for ``epoch``; depends on the arguments only."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perm = torch.randperm(n, generator=g).tolist()
    gb = batch_size * world
    if lengths is not None:  # bucket: sort chunks of about 50 batches by length
        per_batch = max(1, batch_tokens * world // max(1, sum(lengths) // len(lengths))) if batch_tokens else gb
        chunk = per_batch * 50
        perm = [i for s in range(0, len(perm), chunk) for i in sorted(perm[s:s + chunk], key=lambda i: lengths[i])]
    if lengths is not None and batch_tokens:
        groups = token_batches(perm, lengths, batch_tokens * world, min_size=world)
    else:
        groups = [perm[s:s + gb] for s in range(0, len(perm), gb)]
    groups = [b for b in groups if len(b) >= world]
    order = torch.randperm(len(groups), generator=g).tolist()
    return [groups[i][rank::world] for i in order]
