"""Checkpoint weights -> attnkit ``BertModel`` state dict.

Hugging Face BERT names (optionally under a ``bert.`` prefix) map one to one onto attnkit's modules,
except the separate query / key / value projections, which are packed into one
``MultiHeadAttention.in_proj`` (rows: W^q; W^k; W^v). Everything is checked before a model exists:
missing names, unexpected names and shape mismatches each raise one ValueError naming the file.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from ..models.bert import BertConfig

__all__ = ["read_state_dict", "map_bert_weights", "expected_shapes", "IGNORED_PREFIXES"]

# Buffers and task heads that a BERT checkpoint may carry and an encoder does not use.
IGNORED_PREFIXES = ("embeddings.position_ids", "cls.", "classifier.", "qa_outputs.", "lm_head.")

_EMB = {
    "embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight": "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight": "embeddings.norm.weight",
    "embeddings.LayerNorm.bias": "embeddings.norm.bias",
    "pooler.dense.weight": "pooler.dense.weight",
    "pooler.dense.bias": "pooler.dense.bias",
}
# Per layer: HF suffix -> attnkit suffix (query/key/value are packed separately).
_LAYER = {
    "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "attn_block.norm",
    "intermediate.dense": "ff.linear1",
    "output.dense": "ff.linear2",
    "output.LayerNorm": "ff_block.norm",
}
_QKV = ("attention.self.query", "attention.self.key", "attention.self.value")


def read_state_dict(path: Path) -> dict[str, Tensor]:
    """Tensors of a ``.safetensors`` file or a ``pytorch_model.bin`` (``torch.load(weights_only=True)``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path), device="cpu")
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:  # corrupt or truncated files, pickled code (refused), safetensors' own error type
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise ValueError(f"{path}: cannot read weights: {first}") from None
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ValueError(f"{path}: expected a flat dict of tensors")
    return state


def expected_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """Hugging Face name -> shape, for every tensor a checkpoint of ``config`` must hold."""
    d, f = config.hidden_size, config.intermediate_size
    shapes = {
        "embeddings.word_embeddings.weight": (config.vocab_size, d),
        "embeddings.position_embeddings.weight": (config.max_position_embeddings, d),
        "embeddings.token_type_embeddings.weight": (config.type_vocab_size, d),
        "embeddings.LayerNorm.weight": (d,), "embeddings.LayerNorm.bias": (d,),
    }
    if config.with_pooler:
        shapes |= {"pooler.dense.weight": (d, d), "pooler.dense.bias": (d,)}
    # HF suffix -> (weight shape, bias shape)
    per_layer = {**{n: ((d, d), (d,)) for n in _QKV}, "attention.output.dense": ((d, d), (d,)),
                 "attention.output.LayerNorm": ((d,), (d,)), "intermediate.dense": ((f, d), (f,)),
                 "output.dense": ((d, f), (d,)), "output.LayerNorm": ((d,), (d,))}
    for i in range(config.num_hidden_layers):
        for name, (w, b) in per_layer.items():
            shapes[f"encoder.layer.{i}.{name}.weight"] = w
            shapes[f"encoder.layer.{i}.{name}.bias"] = b
    return shapes


def strip_prefix(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Drop a ``bert.`` prefix (checkpoints of task models such as BertForMaskedLM)."""
    if any(k.startswith("bert.") for k in state):
        return {k[5:] if k.startswith("bert.") else k: v for k, v in state.items()}
    return state


def has_pooler(state: dict[str, Tensor]) -> bool:
    return any(k.startswith(("pooler.", "bert.pooler.")) for k in state)


def map_bert_weights(state: dict[str, Tensor], config: BertConfig, *, source: str = "weights",
                     dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """Check a Hugging Face BERT state dict against ``config`` and return attnkit's state dict.

    Raises one ValueError listing all missing names, unexpected names or shape mismatches.
    """
    state = strip_prefix(state)
    want = expected_shapes(config)
    used = {k: v for k, v in state.items() if not k.startswith(IGNORED_PREFIXES)}
    missing = sorted(set(want) - set(used))
    unexpected = sorted(set(used) - set(want))
    problems = []
    if missing:
        problems.append(f"missing weights {missing}")
    if unexpected:
        problems.append(f"unexpected weights {unexpected}")
    bad = [f"{k}: checkpoint {tuple(used[k].shape)}, config {want[k]}"
           for k in sorted(set(want) & set(used)) if tuple(used[k].shape) != want[k]]
    if bad:
        problems.append("shape mismatch between config.json and the weights: " + "; ".join(bad))
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    not_float = sorted(k for k in want if not used[k].dtype.is_floating_point)
    if not_float:
        raise ValueError(f"{source}: weights must be floating point, got integers for {not_float}")

    out: dict[str, Tensor] = {}
    for hf, ours in _EMB.items():
        if hf in used:
            out[ours] = used[hf]
    for i in range(config.num_hidden_layers):
        p, q = f"encoder.layer.{i}", f"encoder.layers.{i}"
        for kind in ("weight", "bias"):
            # (3d, d) rows W^q; W^k; W^v  and biases (3d,)
            out[f"{q}.self_attn.in_proj.{kind}"] = torch.cat([used[f"{p}.{n}.{kind}"] for n in _QKV], dim=0)
            for hf, ours in _LAYER.items():
                out[f"{q}.{ours}.{kind}"] = used[f"{p}.{hf}.{kind}"]
    return {k: v.to(dtype).contiguous() for k, v in out.items()}
