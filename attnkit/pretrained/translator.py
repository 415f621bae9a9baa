"""``TextTranslator``: the base of every translator object (a trained run's ``tasks.translator.Translator``, a
Marian folder's ``pretrained.marian.MarianTranslator``), on the application side of ``generation``.

``translate`` (texts in, texts out, on ``generation.texts.translate_texts``), and ``attend`` / ``lecture``: one
text's translation with the cross-attention that produced each target piece (an ``Alignment``) and its lecture
page (``viz``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..generation.texts import translate_texts

__all__ = ["Alignment", "TextTranslator"]


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
        from ..viz.lecture import model_lecture_html  # drawing: the application side's

        al, ids, mask, rows = self._attend(text, generate_kwargs)
        with torch.no_grad():
            page = model_lecture_html(self.model, lambda: self._lecture_pass(ids, mask, rows), al.target, path,
                                      keys=al.source, title=f"{self.LECTURE}: {text.strip()} -> {al.translation}")
        return page, al
