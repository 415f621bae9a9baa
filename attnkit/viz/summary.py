"""A few lines a reader learns from about one text's attention (``attnkit attend``'s terminal summary).

"Every token attends most to [CLS]" is true of most heads of a BERT-family model and says nothing, so:
the heads are sorted by what their strongest key is for the words (the token before, after, itself, a
marker token such as [CLS]/[SEP] - where heads park when they have nothing to do - or another word);
the weight on the marker tokens per layer; and the strongest word-to-word links of the last layer. Tokens
are numbered from 1, as in the pictures (``labels.token_labels``: "it@9" is q^9).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .html import is_special
from .page import as_numpy

__all__ = ["head_roles", "attention_summary"]

ROLES = ("previous token", "next token", "itself", "[CLS]/[SEP]", "other words")


def head_roles(attentions, tokens: Sequence[str], *, share: float = 0.6) -> dict[str, list[tuple[int, int, int]]]:
    """attentions (N, H, L, L) -> {role: [(layer, head, how many words fit), ...]} (0-based layer and head).

    Over the word tokens (not markers) as queries, a head takes a role when at least ``share`` of
    their strongest keys fit it; "other words" collects the rest, whose strongest key varies.
    """
    w = as_numpy(attentions)
    n_layers, n_heads, lq, lk = w.shape
    words = np.array([not is_special(t) for t in tokens])
    q = np.flatnonzero(words)
    roles: dict[str, list[tuple[int, int, int]]] = {r: [] for r in ROLES}
    if not len(q):
        return roles
    best = w[:, :, q, :].argmax(-1)  # (N, H, Wq): each word's strongest key
    fits = {"previous token": best == (q - 1), "next token": best == (q + 1), "itself": best == q,
            "[CLS]/[SEP]": ~words[best]}
    for n in range(n_layers):
        for h in range(n_heads):
            counts = {r: int(f[n, h].sum()) for r, f in fits.items()}
            role = max(counts, key=counts.get)
            if counts[role] >= share * len(q):
                roles[role].append((n, h, counts[role]))
            else:
                roles["other words"].append((n, h, len(q) - sum(counts.values())))
    return roles


def attention_summary(attentions, tokens: Sequence[str], *, links: int = 6) -> list[str]:
    """Lines to print: the heads by role, the weight on marker tokens per layer, the strongest word links."""
    w = as_numpy(attentions)
    n_layers, n_heads = w.shape[:2]
    words = np.array([not is_special(t) for t in tokens])
    q = np.flatnonzero(words)
    lines = [f"What the {n_layers * n_heads} heads do ({n_layers} layers x {n_heads} heads), judged by where each "
             f"word's strongest key is ({len(q)} words):"]
    for role, heads in head_roles(w, tokens).items():
        if not heads:
            continue
        shown = ", ".join(f"L{n + 1}H{h + 1}" for n, h, _ in heads[:10]) + (" ..." if len(heads) > 10 else "")
        lines.append(f"  {role:>15}: {len(heads):2d} head{'s' if len(heads) > 1 else ' '}  {shown}")
    if (~words).any() and len(q):
        on_markers = w[:, :, q][..., ~words].sum(-1).mean(axis=(1, 2))  # (N,): mean weight words put on markers
        lines.append("Weight the words put on [CLS]/[SEP], per layer (mean over heads): "
                     + "  ".join(f"L{n + 1} {x:.2f}" for n, x in enumerate(on_markers)))
    if len(q) > 1:
        last = w[-1].mean(0)[np.ix_(q, q)].copy()  # (Wq, Wq): the last layer, heads averaged, words only
        np.fill_diagonal(last, 0.0)
        pairs = sorted(((last[a, b], q[a], q[b]) for a in range(len(q)) for b in range(len(q)) if a != b),
                       reverse=True)[:links]
        lines.append(f"Strongest word -> word links in layer {n_layers} (heads averaged, markers and self left out): "
                     + "  ".join(f"{tokens[i]}@{i + 1} -> {tokens[j]}@{j + 1} ({x:.2f})" for x, i, j in pairs))
    return lines
