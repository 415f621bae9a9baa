"""ListOps by nesting depth: how deep an expression's operators go, and accuracy per depth for a model and
for the top-operator rule, so a table can show whether a model computes nested operators or only reads
the first token."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from ..data.listops import END, OPERATORS, VOCAB

__all__ = ["nesting_depth", "rule_by_depth", "model_by_depth"]

_OPEN = {VOCAB.index(op) for op in OPERATORS}
_CLOSE = VOCAB.index(END)


def nesting_depth(tokens: Sequence[int] | Tensor) -> int:
    """The deepest nesting of operators in one expression's token ids (``VOCAB`` indices): 0 for a digit,
    1 for ``[MAX 1 2 ]``, 2 for ``[MAX 1 [MIN 2 3 ] ]``."""
    depth = deepest = 0
    for t in (tokens.tolist() if isinstance(tokens, Tensor) else tokens):
        if t in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif t == _CLOSE:
            depth -= 1
    return deepest


def _tally(pairs) -> dict[str, list[int]]:
    """[(depth, correct)] -> {"depth": [correct, count]} with the depths in order."""
    out: dict[int, list[int]] = {}
    for depth, ok in pairs:
        c = out.setdefault(depth, [0, 0])
        c[0] += int(ok)
        c[1] += 1
    return {str(d): out[d] for d in sorted(out)}


def rule_by_depth(train: Sequence[tuple[Tensor, int]], test: Sequence[tuple[Tensor, int]]) -> dict[str, list[int]]:
    """The top-operator rule (the most frequent training label given the first token) scored per depth of
    the test expressions: {"depth": [correct, count]}."""
    counts: dict[int, dict[int, int]] = {}
    for tokens, y in train:
        c = counts.setdefault(int(tokens[0]), {})
        c[y] = c.get(y, 0) + 1
    rule = {tok: max(c, key=lambda k: (c[k], -k)) for tok, c in counts.items()}
    return _tally((nesting_depth(tokens), rule.get(int(tokens[0]), -1) == y) for tokens, y in test)


@torch.no_grad()
def model_by_depth(model: nn.Module, examples: Sequence[tuple[Tensor, int]], collate: Callable,
                   batch_size: int = 64) -> dict[str, list[int]]:
    """``model`` (tokens, lengths) -> scores, in eval mode, scored per depth: {"depth": [correct, count]}."""
    was = model.training
    model.eval()
    pairs = []
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        tokens, lengths, labels = collate(chunk)
        right = (model(tokens, lengths).argmax(-1) == labels).tolist()
        pairs += [(nesting_depth(e[0]), ok) for e, ok in zip(chunk, right)]
    model.train(was)
    return _tally(pairs)
