"""Subword vocabularies: byte-pair encoding learned with Hugging Face ``tokenizers``, kept as one JSON file.

Spaces become "▁" at the start of the piece that follows them (sentencepiece's convention), so
decoding is exact: ``decode(encode(text)) == text`` for NFKC-normalised text that does not start
with a space. Punctuation marks are pieces of their own. Characters never seen in training become
``<unk>`` (``unknown_characters`` lists them).
The four special tokens have fixed ids: ``<pad>`` 0, ``<s>`` 1 (BOS), ``</s>`` 2 (EOS / END), ``<unk>`` 3.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .jsonfile import regular_file

__all__ = ["Subwords", "learn_bpe", "SPECIALS", "PAD_ID", "BOS_ID", "EOS_ID", "UNK_ID", "BPE_LIMIT"]

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
BPE_LIMIT = 256 << 20  # bytes of a vocabulary file: 32,000 subwords take about 1 MB


def _tokenizers():
    try:
        import tokenizers
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("subword vocabularies need `tokenizers`: pip install 'attnkit[translate]'") from e
    return tokenizers


class Subwords:
    """A BPE vocabulary: ``encode(text) -> ids``, ``decode(ids) -> text``, ``save`` / ``load`` one JSON file."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        for i, tok in enumerate(SPECIALS):
            if tokenizer.token_to_id(tok) != i:
                raise ValueError(f"Subwords: the vocabulary must have {tok!r} at id {i}, "
                                 f"got {tokenizer.token_to_id(tok)}")
        self._alphabet: set[str] | None = None
        self._known: set[str] = set()

    @property
    def size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """The text's subword ids, no special token added (the caller adds END)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def pieces(self, text: str) -> list[str]:
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; special tokens (pad, BOS, EOS) are left out."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def piece(self, i: int) -> str:
        return self.tokenizer.id_to_token(int(i))

    def unknown_characters(self, text: str) -> list[str]:
        """Characters of ``text`` (after normalisation) that the vocabulary has never seen, in order, once each."""
        if self._alphabet is None:
            self._alphabet = {c for tok in self.tokenizer.get_vocab() for c in tok if tok not in SPECIALS}
            self._known = self._alphabet | set(" \t\n\r\x0b\x0c")
        norm = self.tokenizer.normalizer.normalize_str(text) if self.tokenizer.normalizer else text
        if set(norm) <= self._known:  # the usual case, in one pass
            return []
        seen, out = set(), []
        for c in norm:
            if not c.isspace() and c not in self._alphabet and c not in seen:
                seen.add(c)
                out.append(c)
        return out

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # one per process: DDP ranks save it at once
        self.tokenizer.save(str(tmp))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Subwords:
        """The vocabulary saved in ``path`` (a regular file of at most ``BPE_LIMIT`` bytes); one ValueError line
        naming it if it is not one."""
        regular_file(path, BPE_LIMIT)
        tk = _tokenizers()
        try:
            return cls(tk.Tokenizer.from_file(str(path)))
        except Exception as e:  # tokenizers raises its own exception type
            if isinstance(e, ValueError) and str(e).startswith("Subwords:"):
                raise
            raise ValueError(f"{path}: cannot read the subword vocabulary: {e}") from None


def learn_bpe(texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2) -> Subwords:
    """Learn a BPE vocabulary of at most ``vocab_size`` entries (specials included) from ``texts``."""
    if not isinstance(vocab_size, int) or vocab_size <= len(SPECIALS):
        raise ValueError(f"learn_bpe: `vocab_size` must be an integer > {len(SPECIALS)}, got {vocab_size!r}")
    tk = _tokenizers()
    tok = tk.Tokenizer(tk.models.BPE(unk_token="<unk>"))
    tok.normalizer = tk.normalizers.NFKC()
    tok.pre_tokenizer = tk.pre_tokenizers.Sequence([  # "▁" marks a space; punctuation is a piece of its own
        tk.pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        tk.pre_tokenizers.Punctuation(behavior="isolated")])
    tok.decoder = tk.decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                     special_tokens=list(SPECIALS), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return Subwords(tok)
