"""Token labels in pictures: one numbering scheme everywhere, the lecture's (a^1, q^1, ...: 1-based).

``token_labels(tokens)``: every token with its position, ``"it@9"`` beside q^9 (``attnkit attend`` labels
all tokens so). ``tell_apart(labels)``: the labels as given when they are all different, else every label
with its position, so a repeated word ("saw" in "I saw a saw") is never two rows of the same name. Every
picture of ``attnkit.viz`` passes its labels through ``tell_apart`` (the pages' script does the same, by
the same rule: ``distinct`` in ``static/common.js``); the data stored in a page keeps the labels as given.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["token_labels", "tell_apart"]


def token_labels(tokens: Sequence[str]) -> list[str]:
    """``["the", "cat"]`` -> ``["the@1", "cat@2"]``: position i (1-based) as in a^i, q^i, k^i."""
    return [f"{t}@{i + 1}" for i, t in enumerate(tokens)]


def tell_apart(labels: Sequence[str]) -> list[str]:
    """``labels`` as strings if no two are equal, else ``token_labels(labels)``."""
    names = [str(t) for t in labels]
    return names if len(set(names)) == len(names) else token_labels(names)
