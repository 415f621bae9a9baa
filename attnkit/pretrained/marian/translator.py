"""``MarianTranslator``: a loaded Marian folder as a Python object.

    tr = attnkit.load_pretrained("opus-mt-de-en")            # a folder on disk
    tr.translate(["Ein Mann fährt Fahrrad."])                  # the folder's defaults (e.g. num_beams=4)
    tr.translate(texts, num_beams=1, max_new_tokens=64)        # any ``attnkit.generation.generate`` argument
    al = tr.attend("Ein Mann fährt Fahrrad.")                  # cross-attention of the chosen translation

Defaults come from the folder's ``generation_config.json`` (else ``config.json``), as Hugging Face's
``generate`` reads them: ``num_beams``, ``max_length`` (start token included, so ``max_new_tokens`` is
one less), single-token ``bad_words_ids`` (never generated), ``length_penalty``, ``forced_eos_token_id``
(the last step's token) and ``renormalize_logits``; its other settings that differ from Hugging Face's
defaults are named in a ``TranslationWarning``. Texts are sorted by length and decoded in batches; the output
keeps the input's order. A text longer than the model's positions is cut, with
a ``TranslationWarning``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from torch import Tensor

from ...generation import GenerateOutput, generate
from ...generation.generate import RANGES
from ...generation.texts import TranslationWarning, pad_batch
from ...inference import engine_for
from ...inference.dtypes import DType
from ..folder import read_json
from ..translator import TextTranslator
from .tokenizer import MarianTokenizer

__all__ = ["MarianTranslator", "TranslationWarning", "generation_defaults"]


MAX_BEAMS = 256  # beams a folder may ask for by default (each keeps a row of the vocabulary's scores per step)
# generation_config.json's keys attnkit reads (the first six), that repeat config.json (ids, versions) or that
# choose what Hugging Face's generate returns besides the tokens (no effect on a translation)
HONOURED = frozenset({"num_beams", "max_length", "bad_words_ids", "length_penalty", "forced_eos_token_id",
                      "renormalize_logits", "bos_token_id", "eos_token_id",
                      "pad_token_id", "decoder_start_token_id", "transformers_version", "_from_model_config",
                      "use_cache", "output_attentions", "output_hidden_states", "output_scores", "output_logits",
                      "return_dict_in_generate"})
# Hugging Face's other generation settings and their defaults: one that differs is named in a warning
HF_GENERATION = {"do_sample": False, "early_stopping": False, "num_beam_groups": 1, "diversity_penalty": 0.0,
                 "temperature": 1.0, "top_k": 50, "top_p": 1.0, "typical_p": 1.0, "repetition_penalty": 1.0,
                 "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0, "min_length": 0, "min_new_tokens": None,
                 "max_new_tokens": None, "num_return_sequences": 1, "forced_bos_token_id": None,
                 "remove_invalid_values": False,
                 "exponential_decay_length_penalty": None, "suppress_tokens": None, "begin_suppress_tokens": None}


def _count(gen: dict, key: str, low: int, high: int, source: Path) -> int | None:
    """``gen[key]`` (None when absent or null), an integer in [low, high]; else one ValueError naming file and key."""
    v = gen.get(key)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high):
        raise ValueError(f"{source}: `{key}` must be an integer in [{low}, {high}], got {v!r:.80}")
    return v


def _bad_words(gen: dict, vocab: int, source: Path) -> list[int]:
    """The single-token entries of ``bad_words_ids`` (a list of lists of token ids < ``vocab``); sequences of
    several tokens are checked the same way and not used (``generate`` suppresses single tokens)."""
    bad = gen.get("bad_words_ids")
    if bad is None:
        return []
    ok = isinstance(bad, list) and all(isinstance(b, list) and b and all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < vocab for i in b) for b in bad)
    if not ok:
        raise ValueError(f"{source}: `bad_words_ids` must be a list of lists of token ids in [0, {vocab}), "
                         f"got {bad!r:.80}")
    return [b[0] for b in bad if len(b) == 1]


def generation_defaults(folder: Path, hf: dict, config) -> dict:
    """``generate`` keyword defaults from ``generation_config.json`` or ``config.json``, each checked against the
    model's ``config`` (a ``Seq2SeqConfig``: its vocabulary and positions) with a one-line error naming the file."""
    gen_file = Path(folder) / "generation_config.json"
    source = gen_file if gen_file.exists() or gen_file.is_symlink() else Path(folder) / "config.json"
    gen = read_json(gen_file) if source == gen_file else hf
    if not isinstance(gen, dict):
        raise ValueError(f"{gen_file}: expected a JSON object")
    out = {}
    beams = _count(gen, "num_beams", 1, MAX_BEAMS, source)
    if beams is not None:
        out["num_beams"] = beams
    length = _count(gen, "max_length", 1, config.max_positions, source)  # the start token included
    if length is not None and length >= 2:
        out["max_new_tokens"] = length - 1
    single = _bad_words(gen, config.tgt_vocab_size, source)
    if single:
        out["suppress_tokens"] = single
    forced = _count(gen, "forced_eos_token_id", 0, config.tgt_vocab_size - 1, source)
    if forced is not None:  # Hugging Face ends a hypothesis cut by the length limit with this id
        out["forced_eos_token_id"] = forced
    renormalize = gen.get("renormalize_logits")
    if renormalize is not None:
        if not isinstance(renormalize, bool):
            raise ValueError(f"{source}: `renormalize_logits` must be true or false, got {renormalize!r:.80}")
        out["renormalize_logits"] = renormalize
    lp = gen.get("length_penalty")
    if lp is not None:  # Hugging Face's beam search ranks by log p / length ** length_penalty, as generate does
        if not RANGES["length_penalty"].contains(lp):
            raise ValueError(f"{source}: `length_penalty` must be {RANGES['length_penalty'].text()}, got {lp!r:.80}")
        out["length_penalty"] = float(lp)
    ignored = sorted(k for k, v in gen.items() if k in HF_GENERATION and v != HF_GENERATION[k]
                     or source == gen_file and k not in HF_GENERATION and k not in HONOURED)
    if ignored:
        warnings.warn(f"{source}: attnkit does not use {', '.join(f'`{k}`' for k in ignored[:8])}"
                      f"{' ...' if len(ignored) > 8 else ''}; translations may differ from Hugging Face's",
                      TranslationWarning, stacklevel=3)
    return out


class MarianTranslator(TextTranslator):
    """A ``Seq2SeqModel`` + its ``MarianTokenizer`` + generation defaults. ``translate`` / ``generate``."""

    def __init__(self, model, tokenizer: MarianTokenizer, defaults: dict | None = None, *, name: str = "marian",
                 batch_size: int = 32, fast: bool = True, dtype: DType | None = None):
        self.model, self.tokenizer, self.name = model.eval(), tokenizer, name
        self.config = model.config
        self.defaults = dict(defaults or {})
        self.batch_size = batch_size
        # the inference engine (or the model, saying why) in ``dtype``, a row of the dtype table (None: the model's;
        # int8: int8 weights, docs/int8.md)
        self.decoder = engine_for(model, dtype=dtype) if fast else model

    def source_ids(self, text: str, where: str = "input") -> list[int]:
        ids = self.tokenizer.encode(text)
        limit = self.config.max_positions
        if len(ids) > limit:
            warnings.warn(f"{where}: {len(ids)} tokens, more than the model's {limit} positions; translating the "
                          f"first {limit - 1}", TranslationWarning, stacklevel=3)
            ids = ids[: limit - 1] + [self.tokenizer.eos_token_id]
        return ids

    def batch(self, rows: list[list[int]]) -> tuple[Tensor, Tensor]:
        """Right-padded input_ids (B, S) and attention_mask (B, S)."""
        return pad_batch(rows, self.config.pad_token_id)

    def generate(self, input_ids: Tensor, attention_mask: Tensor | None = None, **kwargs) -> GenerateOutput:
        """``attnkit.generation.generate`` with the folder's defaults under ``kwargs``."""
        kw = {**self.defaults, **kwargs}
        kw.setdefault("max_new_tokens", self.config.max_positions - 1)
        return generate(self.decoder, input_ids, attention_mask, **kw)

    def decode(self, sequence) -> str:
        return self.tokenizer.decode(sequence.tolist() if isinstance(sequence, Tensor) else sequence)

    @property
    def _pad_id(self) -> int:
        return self.config.pad_token_id

    def _row_text(self, sequence: Tensor) -> str:
        return self.decode(sequence[1:])  # after the start token

    def _piece(self, token_id: int) -> str:
        return self.tokenizer.piece(token_id)

    def __repr__(self) -> str:
        tc = self.config.transformer
        return (f"MarianTranslator({self.name!r}: {tc.num_encoder_layers}+{tc.num_decoder_layers} layers, "
                f"d_model {tc.d_model}, vocab {self.config.src_vocab_size})")
