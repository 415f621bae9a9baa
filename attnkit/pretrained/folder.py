"""Reading a Hugging Face / sentence-transformers model folder (no Hugging Face code involved).

A folder holds ``config.json``, ``model.safetensors`` (or ``pytorch_model.bin``) and
``tokenizer.json``; sentence-transformers folders add ``modules.json``, ``1_Pooling/config.json``
and ``sentence_bert_config.json``. Every file is checked here, before any model is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.jsonfile import read_json as _read_json

__all__ = ["ModelFolder", "Pooling", "read_folder", "read_config", "weights_file", "read_json", "WEIGHT_FILES",
           "POOLING_MODES", "CONFIG_LIMIT", "TOKENIZER_LIMIT"]

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
CONFIG_LIMIT = 16 << 20  # bytes of a config / vocabulary JSON file (opus-mt's vocab.json: about 1.5 MB)
TOKENIZER_LIMIT = 128 << 20  # bytes of tokenizer.json or a sentencepiece model (large ones take about 20 MB)
# sentence-transformers' pooling modes, in the order it concatenates them.
POOLING_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                 "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len"}
_UNSUPPORTED_POOLING = ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


@dataclass(frozen=True)
class Pooling:
    """Token vectors -> one sentence vector: the named modes, concatenated, then optional L2 norm."""

    modes: tuple[str, ...] = ("mean",)
    normalize: bool = False

    def __post_init__(self):
        known = set(POOLING_MODES.values())
        if not self.modes or any(m not in known for m in self.modes):
            raise ValueError(f"Pooling: `modes` must be a non-empty subset of {sorted(known)}, "
                             f"got {self.modes}")


@dataclass(frozen=True)
class ModelFolder:
    """What a model folder says, checked. ``max_seq_length``: tokens per text, [CLS] and [SEP] included."""

    path: Path
    hf_config: dict[str, Any]
    weights: Path
    tokenizer: Path
    max_seq_length: int
    pooling: Pooling
    do_lower_case: bool = False


def read_json(path: Path) -> Any:
    """A small JSON file of a model folder (``attnkit.data.jsonfile.read_json``: bounded size and depth, one-line
    errors naming the file)."""
    return _read_json(path, limit=CONFIG_LIMIT)


def _read_pooling(folder: Path) -> Pooling:
    """Pooling from ``modules.json`` (Pooling + Normalize modules), else mean pooling, no norm."""
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return Pooling(("mean",), normalize=False)
    modules = read_json(modules_file)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ValueError(f"{modules_file}: expected a list of modules (JSON objects)")
    types = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    supported = {"Transformer", "Pooling", "Normalize"}
    others = [t for t in types if t not in supported]
    if others:
        raise ValueError(f"{modules_file}: unsupported sentence-transformers modules {others}; "
                         f"attnkit runs {sorted(supported)}")
    normalize = "Normalize" in types
    pooling_modules = [m for m, t in zip(modules, types) if t == "Pooling"]
    if not pooling_modules:
        return Pooling(("cls",), normalize=normalize)
    sub = pooling_modules[0].get("path", "1_Pooling")
    if not isinstance(sub, str) or not sub or Path(sub).is_absolute() or ".." in Path(sub).parts:
        raise ValueError(f"{modules_file}: the Pooling module's `path` must be a folder inside {folder}, got {sub!r}")
    pool_file = folder / sub / "config.json"
    cfg = read_json(pool_file)
    if not isinstance(cfg, dict):
        raise ValueError(f"{pool_file}: expected a JSON object")
    used = [k for k in _UNSUPPORTED_POOLING if cfg.get(k)]
    if used:
        raise ValueError(f"{pool_file}: pooling modes {used} are not supported")
    modes = tuple(name for key, name in POOLING_MODES.items() if cfg.get(key))
    if not modes:
        raise ValueError(f"{pool_file}: no pooling mode is enabled")
    return Pooling(modes, normalize=normalize)


def read_config(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """(folder, its config.json as a dict); FileNotFoundError / ValueError naming what is wrong."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder not found: {folder}")
    hf_config = read_json(folder / "config.json")
    if not isinstance(hf_config, dict):
        raise ValueError(f"{folder / 'config.json'}: expected a JSON object")
    return folder, hf_config


def weights_file(folder: Path) -> Path:
    """The folder's weights: model.safetensors, else pytorch_model.bin."""
    weights = next((folder / n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    if weights is None:
        raise FileNotFoundError(f"no weights file in {folder}: expected one of {list(WEIGHT_FILES)}")
    return weights


def read_folder(path: str | Path) -> ModelFolder:
    """Check a model folder and read its small files (the weights are read by the loader)."""
    folder, hf_config = read_config(path)
    weights = weights_file(folder)
    tokenizer = folder / "tokenizer.json"
    if not tokenizer.is_file():
        raise FileNotFoundError(f"file not found: {tokenizer}")
    limit = hf_config.get("max_position_embeddings", 512)
    do_lower_case = False
    st_file = folder / "sentence_bert_config.json"
    if st_file.is_file():
        st = read_json(st_file)
        if not isinstance(st, dict):
            raise ValueError(f"{st_file}: expected a JSON object")
        msl = st.get("max_seq_length")
        if msl is not None:
            if not isinstance(msl, int) or isinstance(msl, bool) or msl < 2:
                raise ValueError(f"{st_file}: max_seq_length must be an integer >= 2, got {msl!r}")
            limit = min(msl, limit)
        do_lower_case = bool(st.get("do_lower_case", False))
    if not isinstance(limit, int) or limit < 2:
        raise ValueError(f"{folder / 'config.json'}: max_position_embeddings must be an integer >= 2, "
                         f"got {limit!r}")
    return ModelFolder(folder, hf_config, weights, tokenizer, limit, _read_pooling(folder), do_lower_case)
