"""``TextTranslator``: the base of every translator object (a trained run's ``tasks.translator.Translator``, a
Marian folder's ``pretrained.marian.MarianTranslator``), on the application side of ``generation``.

``translate`` (texts in, texts out, on ``generation.texts.translate_texts``); ``attend`` / ``decoded``: one text's
translation with the cross-attention that produced each target piece (an ``Alignment``) and the model's pass over
it; ``steps``: one text decoded step by step (``generation.steps``, ``generation.nat_steps``). It draws nothing:
the pages of these are ``attnkit.viz.translation``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..generation.nat_steps import NATSteps, nat_steps
from ..generation.protocol import token_ids
from ..generation.steps import Steps, autoregressive_steps
from ..generation.texts import translate_texts

__all__ = ["Alignment", "Decoded", "TextTranslator"]


@dataclass
class Alignment:
    source: list[str]  # subword pieces of the source, END included
    target: list[str]  # the generated pieces, END included
    weights: Tensor  # (layers, heads, target, source) cross-attention
    translation: str


@dataclass
class Decoded:
    """One text's translation, with what the pages of its attention read."""

    text: str  # the source text, stripped
    alignment: Alignment
    inputs: list[str]  # the decoder's input pieces: the start token and every generated piece but the last (a NAT
    # model: the row it wrote)
    rerun: Callable[[], object]  # the model once over its own translation (teacher-forced; the weights decoding ran)


class TextTranslator:
    """What every translator object (a trained run's, a Marian folder's) does the same way, on top of its own
    ``source_ids(text, where)``, ``batch(rows)``, ``generate(ids, mask, **kwargs)``, ``model`` and
    ``batch_size``: ``translate`` (texts in, texts out), ``attend`` and ``lecture`` (one text's
    cross-attention), ``steps`` (one text decoded step by step). A subclass says how a row of ``generate``'s
    sequences reads (``_row_text``), what a token id is as a piece (``_piece``) and its padding id (``_pad_id``)."""

    _pad_id: int
    LECTURE = "cross-attention, step by step"  # the lecture page's title, before "source -> translation"

    def _row_text(self, sequence: Tensor) -> str:
        raise NotImplementedError

    def _piece(self, token_id: int) -> str:
        raise NotImplementedError

    def translate(self, texts: list[str] | str, *, batch_size: int | None = None, progress=False,
                  **generate_kwargs) -> list[str]:
        """Translate ``texts`` (a list, or one string) -> list of texts, in the same order. ``progress``: a bar
        (tqdm, on stderr) counting the texts translated; None: plain lines in a log when it runs long; a function:
        those lines given to it (``generation.texts.translate_texts``)."""
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

    def decoded(self, text: str, **generate_kwargs) -> Decoded:
        """Translate one text: its ``Alignment``, the decoder's input pieces and the model's pass over its own
        translation (what ``attnkit.viz.translation``'s pages run and show)."""
        al, ids, mask, rows = self._attend(text, generate_kwargs)
        return Decoded(text.strip(), al, [self._piece(i) for i in rows[0].tolist()],
                       lambda: self._lecture_pass(ids, mask, rows))

    def piece(self, token_id: int) -> str:
        """A token id as the pages show it (a subword piece)."""
        return self._piece(token_id)

    def source_pieces(self, text: str) -> list[str]:
        """One text's source as the model reads it: its pieces (END included)."""
        return [self._piece(i) for i in self._source(text)[0][0].tolist()]

    def _step_options(self, source_length: int) -> dict:
        """``generate``'s options of this translator's greedy decoding (``max_new_tokens``, ``suppress_tokens``)."""
        return {"max_new_tokens": self.config.max_positions - 1, **getattr(self, "defaults", {})}

    def token_id(self, token: str) -> int:
        """A target token as the pages show it ("▁dog"; "dog" is the word-initial "▁dog" where there is one, else the
        piece "dog") -> its id."""
        ids = {self._piece(i): i for i in reversed(range(self.config.tgt_vocab_size))}  # piece -> its first id
        for form in ("\u2581" + token, token):
            if form in ids:
                return ids[form]
        raise ValueError(f"{token!r} is not a token of the target vocabulary (tokens are written as the steps page "
                         "shows them, e.g. a candidate of that step)")

    def steps(self, text: str, *, force: list[tuple[int, str]] = (), candidates: int = 5,
              **generate_kwargs) -> Steps | NATSteps:
        """One text decoded step by step (``attnkit.generation.steps``): greedy for an autoregressive model, each
        ``force`` (step from 1, token) a walk of its own; a NAT model's passes (``attnkit.generation.nat_steps``)."""
        ids, mask = self._source(text)
        if getattr(self, "decoding", "ar") == "nat":
            if force:
                raise ValueError("translate: --force: a non-autoregressive model writes every token at once; there "
                                 "is no step to force")
            opts = self.options(generate_kwargs)
            return nat_steps(self.model, ids, mask, **opts)
        opts = {**self._step_options(ids.shape[1]),  # greedy: of the decoding options, only the length applies
                **{k: v for k, v in generate_kwargs.items() if k == "max_new_tokens"}}
        suppress = torch.tensor(opts.get("suppress_tokens", []), dtype=torch.long)
        kw = {"max_new_tokens": opts["max_new_tokens"], "suppress": suppress, "candidates": candidates}
        memory = self.model.encode(ids, mask)
        tok = token_ids(self.model, None, None, None)
        wanted = []
        for step, t in force:
            try:
                wanted.append({step - 1: self.token_id(t)})
            except ValueError as e:
                raise ValueError(f"translate: --force {step}:{t}: {e}") from None
        got = autoregressive_steps(self.model, memory, mask, tok, force=wanted, **kw,  # a Marian folder's own rules
                                   forced_eos=opts.get("forced_eos_token_id"),
                                   renormalize=bool(opts.get("renormalize_logits", False)))
        for step, t in force:
            if not 1 <= step <= len(got.free):
                raise ValueError(f"translate: --force {step}:{t}: the greedy walk has {len(got.free)} steps (1 to "
                                 f"{len(got.free)})")
        return got

    def tokens_text(self, tokens: list[int]) -> str:
        """Generated token ids (no start token) -> text."""
        return self._row_text(torch.tensor([self.config.start_token_id, *tokens]))
