"""Inverted dropout that draws 16 random bits per element instead of a full random number.

``F.dropout`` on CPU draws one Bernoulli sample per element from torch's generator; on a large dense
input (e.g. PubMed-size node features, 19717 x 500) that draw is most of a GAT training epoch.
``dropout16`` takes four 16-bit fields from each 64-bit draw of the same generator (so
``torch.manual_seed`` makes it reproducible), drops an element when its field falls in the lowest
``round(p * 65536)`` of the 65536 values, and scales the rest by 1 / (keep probability), so the
output's expectation is the input, as with ``F.dropout``. The only difference is that p is rounded
to a multiple of 1 / 65536 (0.6 becomes 0.600006). Its time against ``F.dropout``'s: BENCHMARKS.md, "Graph
attention speed".
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["dropout16"]

_LEVELS = 1 << 16


def dropout16(x: Tensor, p: float, training: bool = True) -> Tensor:
    """x (any shape) -> same shape: each element zeroed with probability round(p * 65536) / 65536, the
    others multiplied by 65536 / (65536 - round(p * 65536)). Differentiable; identity when not training."""
    if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout16: `p` must be a number in [0, 1], got {p!r}")
    threshold = round(p * _LEVELS)  # dropped field values: [-32768, threshold - 32768)
    if not training or threshold == 0:
        return x
    if threshold == _LEVELS:
        return x * 0.0
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(1 << 63), None)  # 64 bits each
    fields = words.view(torch.int16)[:n].view(x.shape)  # 4 uniform 16-bit fields per draw: [-32768, 32767]
    drop = fields < threshold - (_LEVELS // 2)
    return x.masked_fill(drop, 0.0).mul_(_LEVELS / (_LEVELS - threshold))
