"""Texts in, texts out around ``generate``: what every translator object does the same way.

``translate_texts(texts, source_ids=..., generate=..., decode=..., pad_id=..., batch_size=...)``: empty
texts translate to empty texts (with a ``TranslationWarning``), the others are turned into ids, sorted
by length (so a batch pads little), decoded ``batch_size`` at a time, and returned in the input's order.
The tokenizer and the model stay with the caller (``source_ids``, ``generate``, ``decode``).

The translator objects built on it (a trained run's, a Marian folder's) share a base on the application side,
``pretrained.translator.TextTranslator``; nothing here draws.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import Tensor

from ..train.progress import counter

__all__ = ["TranslationWarning", "pad_batch", "translate_texts"]


class TranslationWarning(UserWarning):
    """Input a translator had to change: cut to the length limit, unknown characters, empty text."""


def pad_batch(rows: list[list[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    """Token id lists -> right-padded input_ids (B, S) and attention_mask (B, S), 1 = real token."""
    s = max(len(r) for r in rows)
    if all(len(r) == s for r in rows):  # nothing to pad (one sentence): two operations
        ids = torch.tensor(rows, dtype=torch.long)
        return ids, torch.ones_like(ids)
    ids = torch.full((len(rows), s), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), s), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = torch.tensor(r, dtype=torch.long), 1
    return ids, mask


def translate_texts(texts: list[str] | str, *, source_ids: Callable[[str, str], list[int]],
                    generate: Callable[[Tensor, Tensor], object], decode: Callable[[Tensor], str], pad_id: int,
                    batch_size: int, progress: bool | None | Callable[[str], object] = False) -> list[str]:
    """Translate ``texts`` (a list, or one string) -> list of texts in the same order (see the module doc).

    ``source_ids(text, where)``: the ids to translate (``where`` names the text in warnings);
    ``generate(input_ids, attention_mask)``: an object with ``.sequences`` (B, T), the mask None when no row is
    padded; ``decode(row)``: text.
    ``progress``: a progress bar (tqdm, on stderr) counting the texts translated; None: plain lines on stdout,
    at least every 10 s while it runs (``attnkit.train.progress.counter``: for a log); a function: those plain lines
    given to it (the command line's ``translate`` writes them to stderr: its stdout is the translations); False:
    nothing.
    """
    if isinstance(texts, str):
        texts = [texts]
    out = [""] * len(texts)
    rows: dict[int, list[int]] = {}
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"translate: text {i + 1} is a {type(text).__name__}, not a string")
        if not text.strip():
            warnings.warn(f"text {i + 1} is empty: its translation is empty", TranslationWarning, stacklevel=3)
            continue
        rows[i] = source_ids(text.strip(), f"text {i + 1}")
    order = sorted(rows, key=lambda i: len(rows[i]))
    bar = counter("translate", len(order), "texts", progress)
    try:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = [rows[i] for i in chunk]
            if all(len(r) == len(batch[0]) for r in batch):  # nothing padded: no mask for generate to check
                ids, mask = torch.tensor(batch, dtype=torch.long), None
            else:
                ids, mask = pad_batch(batch, pad_id)
            for i, seq in zip(chunk, generate(ids, mask).sequences):
                out[i] = decode(seq)
            bar.update(len(chunk))
    finally:
        bar.close()
    return out
