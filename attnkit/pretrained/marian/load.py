"""``load_marian(folder)``: a Hugging Face Marian (opus-mt) folder -> ``MarianTranslator`` on attnkit's seq2seq model.

The folder holds ``config.json`` (model_type "marian"), ``model.safetensors`` or ``pytorch_model.bin``
(read with ``torch.load(weights_only=True)``: no pickle code runs) and a tokenizer (``tokenizer.json``,
or ``source.spm`` / ``target.spm`` + ``vocab.json``). Everything is checked before a model is built:
a missing file, an architecture attnkit does not run and weights whose names or shapes do not fit
``config.json`` each raise one error naming the file. The sizes in ``config.json`` are checked against
the weights file's own list of tensors (its header: ``weights.tensor_shapes``) before a tensor is read
or anything is allocated: the layers it counts, every table's shape; the one size not stored there,
``max_position_embeddings`` of a folder without position tables, is bounded by ``MAX_POSITIONS``.

Embedding tables that are equal are shared (one table), as are the output projection and the target
table. Stored sinusoidal position tables are checked against the formula; the one difference allowed
is in row 0 of the decoder's table (``attnkit export --format marian`` moves the start token's
embedding there, because CTranslate2 starts Marian decoders from a zero vector): it is moved back
into the start token's row of a target table of its own.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from ...data.safetensors_header import TensorInfo
from ...functional.positional import sinusoidal_table
from ...inference import model_state
from ...inference.dtypes import DType, resolve
from ...models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from ..folder import read_config, read_json, weights_file
from ..weights import layer_count, read_state_dict, tensor_shapes
from .layout import expected_shapes, hf_to_spec, marian_config
from .tokenizer import read_tokenizer
from .translator import MarianTranslator, generation_defaults

__all__ = ["load_marian", "is_marian_folder", "marian_model"]

_POSITIONS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")
_TABLES = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")
MAX_POSITIONS = 16384  # opus-mt checkpoints have 512; the sinusoidal tables of more would take GBs


def is_marian_folder(path: Path) -> bool:
    """True when ``path/config.json`` says model_type "marian"; False without a config.json or for another
    model type; a ValueError naming the file when config.json is there but cannot be read."""
    cfg = Path(path) / "config.json"
    if not (cfg.exists() or cfg.is_symlink()):
        return False
    hf = read_json(cfg)
    if not isinstance(hf, dict):
        raise ValueError(f"{cfg}: expected a JSON object, got {type(hf).__name__}")
    return hf.get("model_type") == "marian"


def _same(a: Tensor, b: Tensor) -> bool:
    return a is b or (a.shape == b.shape and torch.equal(a, b))


def _table_names(names, hf: dict, source: str) -> tuple[str, str, str]:
    """The names of (encoder table, decoder table, output projection) as Hugging Face ties them."""
    share = hf.get("share_encoder_decoder_embeddings", True)
    tie = hf.get("tie_word_embeddings", True)
    shared = "model.shared.weight" if "model.shared.weight" in names else None
    if share and tie and shared is not None:
        enc = dec = shared
    else:
        enc, dec = (n if n in names else (shared if share else None) for n in _TABLES[:2])
    out = dec if tie else ("lm_head.weight" if "lm_head.weight" in names else None)
    missing = [n for n, t in zip(_TABLES, (enc, dec, out)) if t is None]
    if missing:
        raise ValueError(f"{source}: missing weights {missing}")
    return enc, dec, out


def _check_counts(shapes: dict[str, TensorInfo], config: Seq2SeqConfig, cfg_source: str, source: str) -> None:
    """The sizes of config.json that the weights do not show as one tensor's shape, before any loop over them."""
    tc = config.transformer
    for stack, n in (("encoder", tc.num_encoder_layers), ("decoder", tc.num_decoder_layers)):
        have = layer_count(shapes, f"model.{stack}.layers")
        if n > have:  # before any loop over the layers config.json names
            raise ValueError(f"{cfg_source}: `{stack}_layers` is {n}, but {source} holds {have} {stack} layers")
    if not any(k in shapes for k in _POSITIONS) and config.max_positions > MAX_POSITIONS:
        raise ValueError(f"{cfg_source}: `max_position_embeddings` is {config.max_positions}; attnkit makes "
                         f"sinusoidal tables of at most {MAX_POSITIONS} positions")


def _check(shapes: dict[str, TensorInfo], config: Seq2SeqConfig, tables: tuple[str, ...], source: str) -> None:
    """Every tensor's name and shape against ``config`` (share and tie decided by the tensors' names)."""
    d = config.transformer.d_model
    want = expected_shapes(config)
    known = set(want) | {"model.shared.weight", *_TABLES, "final_logits_bias", *_POSITIONS}
    problems = []
    missing = sorted(set(want) - set(shapes))
    unexpected = sorted(set(shapes) - known)
    if missing:
        problems.append(f"missing weights {missing[:8]}{' ...' if len(missing) > 8 else ''}")
    if unexpected:
        problems.append(f"unexpected weights {unexpected[:8]}{' ...' if len(unexpected) > 8 else ''}")
    bad = [f"{k}: checkpoint {shapes[k].shape}, config {want[k]}" for k in sorted(set(want) & set(shapes))
           if shapes[k].shape != want[k]]
    sizes = (config.src_vocab_size, config.tgt_vocab_size, config.tgt_vocab_size)
    for name, t, v in zip(("encoder embedding", "decoder embedding", "output projection"), tables, sizes):
        if shapes[t].shape != (v, d):
            bad.append(f"{name}: checkpoint {shapes[t].shape}, config {(v, d)}")
    bias = shapes.get("final_logits_bias")
    if bias is not None and bias.shape not in ((config.tgt_vocab_size,), (1, config.tgt_vocab_size)):
        bad.append(f"final_logits_bias: checkpoint {bias.shape}, config (1, {config.tgt_vocab_size})")
    for key in _POSITIONS:
        if key in shapes and shapes[key].shape != (config.max_positions, d):
            bad.append(f"{key}: checkpoint {shapes[key].shape}, config {(config.max_positions, d)}")
    if bad:
        problems.append("shapes that do not fit config.json: " + "; ".join(bad[:8]))
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    not_float = sorted(k for k, t in shapes.items() if not t.is_float)
    if not_float:
        raise ValueError(f"{source}: weights must be floating point, got {not_float[:4]}")


def _start_shift(state: dict[str, Tensor], config: Seq2SeqConfig, source: str) -> Tensor | None:
    """The decoder position table's row-0 offset from the formula (None if there is none); errors for others."""
    d, n = config.transformer.d_model, config.max_positions
    shift = None
    for key in _POSITIONS:
        if key not in state:
            continue
        diff = state[key].float() - sinusoidal_table(n, d, layout="halves")  # n rows: as many as the stored table
        rows = (~(diff.abs() <= 1e-4)).any(dim=1).nonzero().flatten().tolist()  # a NaN differs too
        allowed = [0] if key.startswith("model.decoder") else []
        if [r for r in rows if r not in allowed]:
            raise ValueError(f"{source}: {key} is not the sinusoidal table (rows {rows[:5]} differ); attnkit runs "
                             "Marian's fixed positions only")
        if rows:
            shift = diff[0]
    return shift


def marian_model(folder: Path, hf: dict, *, dtype: torch.dtype = torch.float32) -> Seq2SeqModel:
    """The Marian checkpoint of ``folder`` (config already read) as an eval-mode ``Seq2SeqModel``."""
    weights = weights_file(folder)
    source, cfg_source = str(weights), str(folder / "config.json")
    shapes = tensor_shapes(weights)  # names, dtypes and shapes: no tensor read yet
    names = _table_names(shapes, hf, source)
    config = marian_config(hf, source=cfg_source, share_embeddings=False, tie_output=False)
    _check_counts(shapes, config, cfg_source, source)
    _check(shapes, config, names, source)
    state = read_state_dict(weights)  # as many bytes as the file: every shape agrees with config.json
    enc, dec, out = (state[n] for n in names)
    shared, tied = _same(enc, dec), _same(dec, out)
    config = config.replace(share_embeddings=shared, tie_output=tied)
    bias = state.get("final_logits_bias")
    shift = _start_shift(state, config, source)
    if shift is not None:  # the start token's input vector has its own row: untie the target table
        scale = config.transformer.d_model ** 0.5 if config.scale_embedding else 1.0
        dec = dec.clone()
        dec[config.start_token_id] += (shift / scale).to(dec.dtype)
        config = config.replace(share_embeddings=False, tie_output=False)
    spec = hf_to_spec(state, config)  # Marian's names -> the weight spec's, then the model's (inference.model_state)
    spec.update({"source_embedding": enc, "target_embedding": dec, "output.weight": out,
                 "output.bias": torch.zeros(config.tgt_vocab_size) if bias is None else bias.reshape(-1)})
    model = Seq2SeqModel(config, dtype=dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in model_state(spec, model).items()}, strict=True)
    return model.eval()


def load_marian(path: str | Path, *, dtype: DType | torch.dtype | str = "float32",
                fast: bool = True) -> MarianTranslator:
    """A Marian folder -> ``MarianTranslator`` (``translate(texts, **generate_kwargs)``); see the module doc.

    ``dtype``: the weights' dtype by name or as the torch dtype (``attnkit.inference.dtypes``: ``torch.bfloat16``
    halves the bytes read per token; ``torch.int8`` or "int8": float32 weights, the engine's layers quantised to
    int8, docs/int8.md). ``fast``: decode with the model's
    inference engine (``attnkit.inference.engine_for``), same outputs.
    """
    row = resolve(dtype, "load_marian", fast=fast)  # int8: float32 weights, quantised by the engine
    folder, hf = read_config(path)
    early = marian_config(hf, source=str(folder / "config.json"), share_embeddings=False, tie_output=False)
    defaults = generation_defaults(folder, hf, early)
    tokenizer = read_tokenizer(folder)
    model = marian_model(folder, hf, dtype=row.weights)
    if tokenizer.vocab_size > model.config.src_vocab_size:
        raise ValueError(f"{tokenizer.source}: the tokenizer has {tokenizer.vocab_size} ids but config.json's "
                         f"vocab_size is {model.config.src_vocab_size}")
    if tokenizer.eos_token_id != model.config.eos_token_id or tokenizer.pad_token_id != model.config.pad_token_id:
        raise ValueError(f"{tokenizer.source}: </s> and <pad> have ids {tokenizer.eos_token_id} and "
                         f"{tokenizer.pad_token_id}, config.json says eos_token_id {model.config.eos_token_id} and "
                         f"pad_token_id {model.config.pad_token_id}")
    return MarianTranslator(model, tokenizer, defaults, name=folder.name, fast=fast, dtype=row)

