"""The pages of one translation, written from a translator object (``attnkit.pretrained.translator.TextTranslator``:
a trained run's or a Marian folder's), which decodes and hands over what they show; the translator draws nothing.

- ``lecture_page``: the lecture page of the decoder's cross-attention (``viz.lecture.model_lecture_html``);
- ``decoder_page``: the encoder's self-attention, the decoder's (masked in an autoregressive model) and the
  cross-attention as three tabs (``viz.decoder``);
- ``decoder_lecture_page``: the lecture page of the decoder's self-attention (``viz.decoder``);
- ``steps_page``: the decoding step by step (``viz.steps_page``), with the lines the terminal prints.

Each translates the text with ``generate_kwargs`` and runs the model once over its own translation (teacher-forced:
the weights decoding ran), and returns (page, what was decoded).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..generation.nat_steps import NATSteps
from .decoder import decoder_attention, decoder_html, decoder_lecture_html, decoder_positions
from .lecture import model_lecture_html
from .steps_page import nat_steps_html, nat_steps_lines, steps_html, steps_lines

__all__ = ["lecture_page", "decoder_page", "decoder_lecture_page", "steps_page"]


def lecture_page(tr, text: str, path: str | os.PathLike, **generate_kwargs):
    """The lecture page of the cross-attention of ``text``'s translation: per layer and head, q of each target
    position, k and v of every source piece, the scores, the softmax, the weighted sum and W^o. Returns
    (page, Alignment)."""
    d = tr.decoded(text, **generate_kwargs)
    al = d.alignment
    with torch.no_grad():
        page = model_lecture_html(tr.model, d.rerun, al.target, path, keys=al.source,
                                  title=f"{tr.LECTURE}: {d.text} -> {al.translation}")
    return page, al


def decoder_page(tr, text: str, path: str | os.PathLike, **generate_kwargs):
    """The page of ``text``'s encoder self-attention, decoder self-attention (masked in an autoregressive model)
    and cross-attention as three tabs, from the model run once over its own translation. Returns (page,
    Alignment)."""
    d = tr.decoded(text, **generate_kwargs)
    al = d.alignment
    att = decoder_attention(tr.model, d.rerun)
    return decoder_html(att, al.source, d.inputs, al.target, path, title=f"{d.text} -> {al.translation}"), al


def decoder_lecture_page(tr, text: str, path: str | os.PathLike, **generate_kwargs):
    """The lecture page of the decoder's self-attention over ``text``'s translation (masked in an autoregressive
    model: a query's later keys get alpha' = 0). Returns (page, Alignment)."""
    d = tr.decoded(text, **generate_kwargs)
    inputs = decoder_positions(d.inputs, d.alignment.target)  # as the tabs label them
    page = decoder_lecture_html(tr.model, d.rerun, inputs, path, title=f"the decoder's self-attention, step by "
                                f"step: {d.text} -> {d.alignment.translation}")
    return page, d.alignment


def steps_page(tr, text: str, path: str | os.PathLike, *, force: list[tuple[int, str]] = (), candidates: int = 5,
               **generate_kwargs) -> tuple[Path, list[str]]:
    """``tr.steps`` (greedy decoding step by step, each ``force`` (step from 1, token) a walk of its own; a NAT
    model's passes) as a page and terminal lines. Returns (page, lines)."""
    got = tr.steps(text, force=force, candidates=candidates, **generate_kwargs)
    source = tr.source_pieces(text)
    title = f"decoding step by step: {text.strip()}"
    if isinstance(got, NATSteps):
        return (nat_steps_html(got, source, tr.piece, tr.tokens_text, path, title=title),
                nat_steps_lines(got, tr.piece, tr.tokens_text))
    return (steps_html(got, source, tr.piece, tr.tokens_text, path, title=title),
            steps_lines(got, tr.piece, tr.tokens_text))
