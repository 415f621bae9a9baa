"""Text <-> token ids for a Marian (opus-mt) folder, as Hugging Face's ``MarianTokenizer`` does it.

Two kinds of folder:

- ``tokenizer.json`` (a Hugging Face ``tokenizers`` file, e.g. what ``attnkit export --format marian``
  writes): the text is split and mapped to ids by that file (and cut as its ``truncation`` says), END
  appended;
- ``source.spm`` / ``target.spm`` + ``vocab.json`` (+ ``target_vocab.json`` with ``separate_vocabs``
  in ``tokenizer_config.json``), what the opus-mt releases ship: ``sentencepiece`` splits the text into
  pieces with the source model, ``vocab.json`` maps each piece to its id (a piece it does not list
  becomes ``<unk>``), END appended. A leading language code such as ``>>fra<<`` is one token.
  Decoding maps ids back to pieces (special tokens dropped) and joins them with a sentencepiece model:
  the source one when the vocabulary is shared (as ``MarianTokenizer`` does), else the target one.
"""

from __future__ import annotations

from pathlib import Path

from ...data.jsonfile import regular_file
from ..folder import TOKENIZER_LIMIT, read_json

__all__ = ["MarianTokenizer", "read_tokenizer", "SPM_FILES"]

SPM_FILES = ("source.spm", "target.spm", "vocab.json")


class MarianTokenizer:
    """``encode(text) -> ids`` (END appended), ``decode(ids) -> text``, ``piece(id)``; special token ids."""

    def __init__(self, *, encode, decode, pieces: dict[int, str], specials: dict[str, int], source: Path):
        self._encode, self._decode, self._pieces = encode, decode, pieces
        self.source = source  # the file (tokenizer.json or vocab.json) the vocabulary came from
        self.eos_token_id, self.pad_token_id = specials["</s>"], specials["<pad>"]
        self.unk_token_id = specials.get("<unk>")
        self.special_ids = frozenset(specials.values())

    @property
    def vocab_size(self) -> int:
        return max(self._pieces) + 1 if self._pieces else 0

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, END last."""
        return [*self._encode(text), self.eos_token_id]

    def decode(self, ids) -> str:
        """Ids -> text; special tokens (END, padding, unknown) are left out."""
        return self._decode([int(i) for i in ids if int(i) not in self.special_ids])

    def piece(self, i: int) -> str:
        return self._pieces.get(int(i), "<unk>")


def _specials(vocab: dict[str, int], source: Path) -> dict[str, int]:
    found = {t: vocab[t] for t in ("</s>", "<pad>", "<unk>") if t in vocab}
    missing = [t for t in ("</s>", "<pad>") if t not in found]
    if missing:
        raise ValueError(f"{source}: the vocabulary has no {' or '.join(missing)} token")
    return found


def _from_tokenizer_json(path: Path) -> MarianTokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("Marian folders need `tokenizers`: pip install 'attnkit[pretrained]'") from e
    regular_file(path, TOKENIZER_LIMIT)
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises its own exception type
        raise ValueError(f"{path}: cannot read the tokenizer: {e}") from None
    tok.no_padding()
    limit = (tok.truncation or {}).get("max_length")  # the file's cut, END included
    tok.no_truncation()
    vocab = tok.get_vocab(with_added_tokens=True)
    specials = _specials(vocab, path)
    pieces = {i: t for t, i in vocab.items()}
    keep = limit - 1 if isinstance(limit, int) and limit > 1 else None
    return MarianTokenizer(encode=lambda text: tok.encode(text, add_special_tokens=False).ids[:keep],
                           decode=lambda ids: tok.decode(ids, skip_special_tokens=False),
                           pieces=pieces, specials=specials, source=path)


def _load_spm(path: Path):
    try:
        import sentencepiece
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("Marian folders with source.spm / target.spm need `sentencepiece`: "
                          "pip install 'attnkit[pretrained]'") from e
    regular_file(path, TOKENIZER_LIMIT)
    sp = sentencepiece.SentencePieceProcessor()
    try:
        sp.Load(str(path))
    except (OSError, RuntimeError) as e:
        raise ValueError(f"{path}: cannot read the sentencepiece model: {e}") from None
    return sp


def _read_vocab(path: Path) -> dict[str, int]:
    vocab = read_json(path)
    if not isinstance(vocab, dict) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                              for i in vocab.values()):
        raise ValueError(f"{path}: expected a JSON object of piece -> id (integers >= 0)")
    return vocab


def _from_spm(folder: Path, options: dict) -> MarianTokenizer:
    for name in SPM_FILES:
        if not (folder / name).is_file():
            raise FileNotFoundError(f"file not found: {folder / name} (a Marian folder needs tokenizer.json, or "
                                    f"{', '.join(SPM_FILES)})")
    separate = bool(options.get("separate_vocabs", False))
    src_vocab = _read_vocab(folder / "vocab.json")
    tgt_path = folder / "target_vocab.json"
    if separate and not tgt_path.is_file():
        raise FileNotFoundError(f"file not found: {tgt_path} (tokenizer_config.json sets separate_vocabs)")
    tgt_vocab = _read_vocab(tgt_path) if separate else src_vocab
    src_spm = _load_spm(folder / "source.spm")
    join_spm = _load_spm(folder / "target.spm") if separate else src_spm
    specials = _specials(src_vocab, folder / "vocab.json")
    unk = src_vocab.get("<unk>")
    if unk is None:
        raise ValueError(f"{folder / 'vocab.json'}: the vocabulary has no <unk> token")

    def encode(text: str) -> list[int]:
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:  # a target-language code: one token
            code, text = [text[:end + 2]], text[end + 2:]
        return [src_vocab.get(p, unk) for p in code + src_spm.encode(text, out_type=str)]

    pieces = {i: t for t, i in tgt_vocab.items()}

    def decode(ids: list[int]) -> str:
        text = join_spm.decode_pieces([pieces.get(i, "<unk>") for i in ids])
        return text.replace("\u2581", " ").strip()

    return MarianTokenizer(encode=encode, decode=decode, pieces=pieces, specials=specials,
                           source=folder / "vocab.json")


def read_tokenizer(folder: Path) -> MarianTokenizer:
    """The folder's tokenizer: ``tokenizer.json`` if present, else the sentencepiece files + ``vocab.json``."""
    folder = Path(folder)
    if (folder / "tokenizer.json").exists():
        return _from_tokenizer_json(folder / "tokenizer.json")
    options_file = folder / "tokenizer_config.json"
    options = read_json(options_file) if options_file.is_file() else {}
    if not isinstance(options, dict):
        raise ValueError(f"{options_file}: expected a JSON object")
    return _from_spm(folder, options)
