"""Texts in, texts out around ``generate``: what every translator object does the same way.

``translate_texts(texts, source_ids=..., generate=..., decode=..., pad_id=..., batch_size=...)``: empty
texts translate to empty texts (with a ``TranslationWarning``), the others are turned into ids, sorted
by length (so a batch pads little), decoded ``batch_size`` at a time, and returned in the input's order.
The tokenizer and the model stay with the caller (``source_ids``, ``generate``, ``decode``).

``TextTranslator``: the base of every translator object: ``translate`` on ``translate_texts``, and
``attend`` / ``lecture``, one text's translation with the cross-attention that produced each target piece
(an ``Alignment``) and its lecture page.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Alignment", "TextTranslator", "TranslationWarning", "pad_batch", "translate_texts"]


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


def _progress_bar(total: int):
    """A tqdm bar over ``total`` texts, on stderr."""
    try:
        from tqdm.auto import tqdm
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("translate(progress=True) needs tqdm: pip install 'attnkit[translate]'") from e
    return tqdm(total=total, desc="translate", unit="text", leave=False, dynamic_ncols=True, mininterval=0, miniters=1)


def translate_texts(texts: list[str] | str, *, source_ids: Callable[[str, str], list[int]],
                    generate: Callable[[Tensor, Tensor], object], decode: Callable[[Tensor], str], pad_id: int,
                    batch_size: int, progress: bool = False) -> list[str]:
    """Translate ``texts`` (a list, or one string) -> list of texts in the same order (see the module doc).

    ``source_ids(text, where)``: the ids to translate (``where`` names the text in warnings);
    ``generate(input_ids, attention_mask)``: an object with ``.sequences`` (B, T), the mask None when no row is
    padded; ``decode(row)``: text.
    ``progress``: a progress bar (tqdm, on stderr) counting the texts translated.
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
    bar = _progress_bar(len(order)) if progress else None
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
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    return out


@dataclass
class Alignment:
    source: list[str]  # subword pieces of the source, END included
    target: list[str]  # the generated pieces, END included
    weights: Tensor  # (layers, heads, target, source) cross-attention
    translation: str


class TextTranslator:
    """What every translator object (a trained run's, a Marian folder's) does the same way, on top of its own
    ``source_ids(text, where)``, ``batch(rows)``, ``generate(ids, mask, **kwargs)``, ``model`` and
    ``batch_size``: ``translate`` (texts in, texts out), ``attend`` and ``lecture`` (one text's
    cross-attention). A subclass says how a row of ``generate``'s sequences reads (``_row_text``), what a
    token id is as a piece (``_piece``) and its padding id (``_pad_id``)."""

    _pad_id: int
    LECTURE = "cross-attention, step by step"  # the lecture page's title, before "source -> translation"

    def _row_text(self, sequence: Tensor) -> str:
        raise NotImplementedError

    def _piece(self, token_id: int) -> str:
        raise NotImplementedError

    def translate(self, texts: list[str] | str, *, batch_size: int | None = None, progress: bool = False,
                  **generate_kwargs) -> list[str]:
        """Translate ``texts`` (a list, or one string) -> list of texts, in the same order. ``progress``: a bar
        (tqdm, on stderr) counting the texts translated."""
        return translate_texts(texts, source_ids=self.source_ids, decode=self._row_text, pad_id=self._pad_id,
                               generate=lambda ids, mask: self.generate(ids, mask, **generate_kwargs),
                               batch_size=batch_size or self.batch_size, progress=progress)

    def attend(self, text: str, **generate_kwargs) -> Alignment:
        """Translate one text and return the cross-attention that produced each target piece."""
        return self._attend(text, generate_kwargs)[0]

    def _source(self, text: str) -> tuple[Tensor, Tensor]:
        """One text -> its ids (1, S) and mask (1, S); an empty text is an error."""
        if not text.strip():
            raise ValueError("attend: the text is empty")
        return self.batch([self.source_ids(text.strip())])

    def _attend(self, text: str, generate_kwargs: dict) -> tuple[Alignment, Tensor, Tensor, Tensor]:
        """(the alignment, source ids (1, S), its mask (1, S), the decoder's input (1, T): the start token and
        every generated piece but the last)."""
        ids, mask = self._source(text)
        res = self.generate(ids, mask, output_attentions=True, **generate_kwargs)
        n = int(res.lengths[0])
        tgt = res.sequences[0, 1:1 + n].tolist()
        al = Alignment([self._piece(i) for i in ids[0].tolist()], [self._piece(i) for i in tgt],
                       res.cross_attentions[0, :, :, :n], self._row_text(res.sequences[0]))
        return al, ids, mask, res.sequences[:, :n]

    def _lecture_pass(self, ids: Tensor, mask: Tensor, rows: Tensor):
        """The model run once over its own translation (teacher-forced; the same weights as decoding step by
        step): what the lecture page records."""
        return self.model(ids, mask, rows)

    def lecture(self, text: str, path, **generate_kwargs):
        """Translate one text, then write the lecture page of the decoder's cross-attention for it
        (``attnkit.viz.model_lecture_html``): per layer and head, q of each target position, k and v of every
        source piece, the scores, the softmax, the weighted sum and W^o. Returns (page, Alignment)."""
        from ..viz.lecture import model_lecture_html

        al, ids, mask, rows = self._attend(text, generate_kwargs)
        with torch.no_grad():
            page = model_lecture_html(self.model, lambda: self._lecture_pass(ids, mask, rows), al.target, path,
                                      keys=al.source, title=f"{self.LECTURE}: {text.strip()} -> {al.translation}")
        return page, al
