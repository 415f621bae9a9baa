"""Texts in, texts out around ``generate``: what every translator object does the same way.

``translate_texts(texts, source_ids=..., generate=..., decode=..., pad_id=..., batch_size=...)``: empty
texts translate to empty texts (with a ``TranslationWarning``), the others are turned into ids, sorted
by length (so a batch pads little), decoded ``batch_size`` at a time, and returned in the input's order.
The tokenizer and the model stay with the caller (``source_ids``, ``generate``, ``decode``).

``align_text(text, ...)``: one text's translation with the cross-attention that produced each target
piece (an ``Alignment``); ``lecture_page(model, ...)`` the lecture page of that cross-attention.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Alignment", "TranslationWarning", "align_text", "lecture_page", "pad_batch", "translate_texts"]


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
    ``generate(input_ids, attention_mask)``: an object with ``.sequences`` (B, T); ``decode(row)``: text.
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
            ids, mask = pad_batch([rows[i] for i in chunk], pad_id)
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


def align_text(text: str, *, source_ids: Callable[[str], list[int]],
               batch: Callable[[list[list[int]]], tuple[Tensor, Tensor]], generate: Callable[..., object],
               decode: Callable[[Tensor], str],
               piece: Callable[[int], str]) -> tuple[Alignment, Tensor, Tensor, Tensor]:
    """Translate one text with ``generate(ids, mask, output_attentions=True)`` -> (the Alignment, source ids
    (1, S), its mask (1, S), the decoder's input (1, T): the start token and every generated piece but the
    last). ``decode(sequences row)`` -> text; ``piece(id)`` -> the piece's string."""
    if not text.strip():
        raise ValueError("attend: the text is empty")
    ids, mask = batch([source_ids(text.strip())])
    res = generate(ids, mask, output_attentions=True)
    n = int(res.lengths[0])
    tgt = res.sequences[0, 1:1 + n].tolist()
    al = Alignment([piece(i) for i in ids[0].tolist()], [piece(i) for i in tgt], res.cross_attentions[0, :, :, :n],
                   decode(res.sequences[0]))
    return al, ids, mask, res.sequences[:, :n]


def lecture_page(model, al: Alignment, ids: Tensor, mask: Tensor, decoder_input: Tensor, path, text: str):
    """The lecture page of a seq2seq model's cross-attention for ``al`` (``attnkit.viz.model_lecture_html``):
    per layer and head, q of each target position, k and v of every source piece, the scores, the softmax,
    the weighted sum and W^o, from ``model(ids, mask, decoder_input)`` run once over its own translation
    (teacher-forced; the same weights as decoding step by step). Returns the page's path."""
    import torch

    from ..viz.lecture import model_lecture_html

    with torch.no_grad():
        return model_lecture_html(model, lambda: model(ids, mask, decoder_input), al.target, path, keys=al.source,
                                  title=f"cross-attention, step by step: {text.strip()} -> {al.translation}")
