"""``Translator``: a trained translation run as a Python object (what ``attnkit.load_pretrained(RUN)`` returns).

    tr = attnkit.load_pretrained("runs/de-en")
    tr.translate(["Ein Mann fährt Fahrrad."])                 # ['A man is riding a bike.']
    tr.translate(texts, num_beams=5)                           # any ``attnkit.generation.generate`` argument
    al = tr.attend("Ein Mann fährt Fahrrad.")                  # cross-attention of the chosen translation

Texts are split into subwords with the run's BPE vocabulary, sorted by length and decoded in batches;
the output is detokenised text in the input's order. An empty text translates to an empty text;
a text longer than the model's limit is cut (``TranslationWarning``); characters the vocabulary has
never seen become ``<unk>`` (``TranslationWarning``). PAD, BOS and ``<unk>`` are never generated.
"""

from __future__ import annotations

import math
import time
import warnings

from torch import Tensor

from ..data.bpe import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Subwords
from ..generation import GenerateOutput, generate
from ..generation.texts import TranslationWarning, pad_batch
from ..inference import engine_for
from ..inference.dtypes import DType
from ..pretrained.translator import Alignment, TextTranslator

__all__ = ["Translator", "Alignment", "TranslationWarning", "bleu_report"]


class Translator(TextTranslator):
    """A ``Seq2SeqModel`` + its subword vocabulary + the run's meta. ``translate`` / ``generate`` / ``attend``."""

    decoding = "ar"  # autoregressive; a non-autoregressive run loads as ``translate_nat.NATTranslator``
    _pad_id = PAD_ID

    def __init__(self, model, subwords: Subwords, meta: dict, *, dtype: DType | None = None, batch_size: int = 64):
        """``dtype``: the engine's, a row of the dtype table (None: the model's; int8: int8 weights of the float32
        model, docs/int8.md)."""
        self.model, self.subwords, self.meta = model.eval(), subwords, meta
        self._decoder, self._dtype = None, dtype
        self.config = model.config
        self.max_length = int(meta.get("max_length", self.config.max_positions))
        self.batch_size = batch_size

    # -- sources -------------------------------------------------------------------------------
    def source_ids(self, text: str, where: str = "input") -> list[int]:
        """Subword ids + END, cut to the length limit (with a warning)."""
        ids = self.subwords.encode(text)
        unknown = self.subwords.unknown_characters(text) if UNK_ID in ids else None  # only they read as <unk>
        if unknown:
            warnings.warn(f"{where}: characters never seen in training, read as <unk>: "
                          f"{' '.join(repr(c) for c in unknown)}", TranslationWarning, stacklevel=3)
        if len(ids) > self.max_length - 1:
            warnings.warn(f"{where}: {len(ids)} subwords, more than the model's limit of {self.max_length - 1}; "
                          f"translating the first {self.max_length - 1}", TranslationWarning, stacklevel=3)
            ids = ids[: self.max_length - 1]
        return ids + [EOS_ID]

    @staticmethod
    def batch(rows: list[list[int]]) -> tuple[Tensor, Tensor]:
        """Right-padded input_ids (B, S) and attention_mask (B, S)."""
        return pad_batch(rows, PAD_ID)

    def _defaults(self, source_length: int, kwargs: dict) -> dict:
        nat = sorted({"iterations", "length_candidates"} & set(kwargs))
        if nat:
            raise ValueError(f"translate: {', '.join(nat)} {'is an option' if len(nat) == 1 else 'are options'} of "
                             "non-autoregressive runs (attnkit train translate --decoder nat); this run is "
                             "autoregressive: use num_beams= or do_sample=")
        kw = {"max_new_tokens": min(self.max_length, math.ceil(1.5 * source_length) + 10),
              "suppress_tokens": [PAD_ID, BOS_ID, UNK_ID], **kwargs}
        return kw

    # -- decoding ------------------------------------------------------------------------------
    def generate(self, input_ids: Tensor, attention_mask: Tensor | None = None, **kwargs) -> GenerateOutput:
        """``attnkit.generation.generate`` on this model (Hugging Face's argument names)."""
        return generate(self.decoder, input_ids, attention_mask, **self._defaults(input_ids.shape[1], kwargs))

    def _step_options(self, source_length: int) -> dict:
        return self._defaults(source_length, {})

    @property
    def decoder(self):
        """What ``generate`` (or ``mask_predict``) runs: the model's inference engine
        (``attnkit.inference.engine_for``, made on first use, same outputs to float rounding), or the model itself
        where no engine runs it."""
        if self._decoder is None:
            self._decoder = engine_for(self.model, dtype=self._dtype)
        return self._decoder

    def describe(self, kwargs: dict) -> str:
        """How ``translate(**kwargs)`` decodes, in words (for reports)."""
        beams = kwargs.get("num_beams", 1)
        if kwargs.get("do_sample"):
            return "sampling"
        return "greedy" if beams == 1 else f"beam {beams}"

    def decode(self, sequence: Tensor) -> str:
        """One row of ``generate(...).sequences`` -> text (start, END and padding dropped)."""
        return self.subwords.decode(t for t in sequence.tolist() if t not in (PAD_ID, BOS_ID, EOS_ID))

    def _row_text(self, sequence: Tensor) -> str:
        return self.decode(sequence)

    def _piece(self, token_id: int) -> str:
        return self.subwords.piece(token_id)


def bleu_report(translator: Translator, sources: list[str], references: list[str], *, name: str = "test",
                progress: bool | None = False, **generate_kwargs) -> list[str]:
    """Translate ``sources`` and score them against ``references`` with sacreBLEU: lines to print."""
    try:
        import sacrebleu
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("BLEU needs `sacrebleu`: pip install 'attnkit[translate]'") from e
    if len(sources) != len(references):
        raise ValueError(f"bleu: {len(sources)} sources but {len(references)} references")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TranslationWarning)
        hyps = translator.translate(sources, progress=progress, **generate_kwargs)
    seconds = time.perf_counter() - t0
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b, c = bleu.corpus_score(hyps, [references]), chrf.corpus_score(hyps, [references])
    how = translator.describe(generate_kwargs)
    lines = [f"{name} ({len(sources)} sentences, {how}, {seconds:.1f} s): BLEU {b.score:.2f}  chrF {c.score:.2f}",
             f"  {b}", f"  sacreBLEU signature: {bleu.get_signature()}", f"  chrF signature: {chrf.get_signature()}"]
    if caught:
        lines.append(f"  {len(caught)} warnings while translating (first: {caught[0].message})")
    return lines
