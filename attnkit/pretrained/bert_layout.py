"""Hugging Face BERT (``BertModel``, sentence-transformers' folders) -> attnkit's weight spec: the weight names.

The BERT-family checkpoint's names map to the spec's (``inference.spec``), as Marian's do
(``pretrained/marian/layout.py``), and the spec's map to ``models.bert.BertModel``'s through the one architectures
table (``inference.model_state``). Its query / key / value projections are separate matrices; the spec packs them
into one ``qkv`` (rows W^q; W^k; W^v). Everything is checked before a model exists: missing names, unexpected names
and shape mismatches each raise one ValueError naming the file.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..models.bert import BertConfig
from .weights import layer_count

__all__ = ["BERT_TOP", "BERT_LAYER", "IGNORED_PREFIXES", "name_pairs", "expected_shapes", "strip_prefix", "has_pooler",
           "bert_to_spec"]

# Buffers and task heads that a BERT checkpoint may carry and an encoder does not use.
IGNORED_PREFIXES = ("embeddings.position_ids", "cls.", "classifier.", "qa_outputs.", "lm_head.")

# The spec's name -> Hugging Face's, outside the layers (the pooler's only where the checkpoint has one).
BERT_TOP = {"source_embedding": "embeddings.word_embeddings.weight",
            "encoder.positions": "embeddings.position_embeddings.weight",
            "token_types": "embeddings.token_type_embeddings.weight",
            "embedding_norm.weight": "embeddings.LayerNorm.weight", "embedding_norm.bias": "embeddings.LayerNorm.bias",
            "pooler.weight": "pooler.dense.weight", "pooler.bias": "pooler.dense.bias"}
# Per layer: the spec's field -> BERT's module(s), weights and biases alike; three modules are BERT's W^q, W^k, W^v
# of the spec's one packed projection.
BERT_LAYER = {"qkv": ("attention.self.query", "attention.self.key", "attention.self.value"),
              "self_out": ("attention.output.dense",), "self_norm": ("attention.output.LayerNorm",),
              "ff1": ("intermediate.dense",), "ff2": ("output.dense",), "ff_norm": ("output.LayerNorm",)}


def name_pairs(config: BertConfig):
    """Yield (spec name, [Hugging Face names]) of every tensor a checkpoint of ``config`` holds: one name, or W^q,
    W^k, W^v packed."""
    for spec, hf in BERT_TOP.items():
        if config.with_pooler or not spec.startswith("pooler."):
            yield spec, [hf]
    for i in range(config.num_hidden_layers):
        for field, modules in BERT_LAYER.items():
            for p in ("weight", "bias"):
                yield f"encoder.layers.{i}.{field}.{p}", [f"encoder.layer.{i}.{m}.{p}" for m in modules]


def expected_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """Hugging Face name -> shape, for every tensor a checkpoint of ``config`` must hold."""
    d, f = config.hidden_size, config.intermediate_size
    top = {"source_embedding": (config.vocab_size, d), "encoder.positions": (config.max_position_embeddings, d),
           "token_types": (config.type_vocab_size, d), "embedding_norm.weight": (d,), "embedding_norm.bias": (d,),
           "pooler.weight": (d, d), "pooler.bias": (d,)}
    # per layer: the spec's field -> (each Hugging Face module's weight shape, its bias shape)
    layer = {"qkv": ((d, d), (d,)), "self_out": ((d, d), (d,)), "self_norm": ((d,), (d,)), "ff1": ((f, d), (f,)),
             "ff2": ((d, f), (d,)), "ff_norm": ((d,), (d,))}
    shapes = {}
    for spec, hfs in name_pairs(config):
        if spec in top:
            shape = top[spec]
        else:
            field, p = spec.split(".")[-2:]  # encoder.layers.{i}.{field}.{weight,bias}
            shape = layer[field][p == "bias"]
        shapes.update({h: shape for h in hfs})
    return shapes


def strip_prefix(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Drop a ``bert.`` prefix (checkpoints of task models such as BertForMaskedLM)."""
    if any(k.startswith("bert.") for k in state):
        return {k[5:] if k.startswith("bert.") else k: v for k, v in state.items()}
    return state


def has_pooler(state: dict[str, Tensor]) -> bool:
    return any(k.startswith(("pooler.", "bert.pooler.")) for k in state)


def _problems(used: dict[str, Tensor], want: dict[str, tuple[int, ...]]) -> list[str]:
    """What is missing, unexpected or of another shape than ``config.json`` says."""
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
    return problems


def bert_to_spec(state: dict[str, Tensor], config: BertConfig, *, source: str = "weights",
                 dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """Check a Hugging Face BERT state dict against ``config`` and return its tensors by spec name, in ``dtype``
    (``inference.model_state`` gives them ``BertModel``'s names).

    Raises one ValueError listing all missing names, unexpected names or shape mismatches.
    """
    state = strip_prefix(state)
    have = layer_count(state, "encoder.layer")
    if config.num_hidden_layers > have:  # before a loop over the layers config.json names
        raise ValueError(f"{source}: config.json has num_hidden_layers {config.num_hidden_layers}, the weights "
                         f"hold {have} layers")
    want = expected_shapes(config)
    used = {k: v for k, v in state.items() if not k.startswith(IGNORED_PREFIXES)}
    problems = _problems(used, want)
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    not_float = sorted(k for k in want if not used[k].dtype.is_floating_point)
    if not_float:
        raise ValueError(f"{source}: weights must be floating point, got integers for {not_float}")
    out = {spec: torch.cat([used[h] for h in hfs], dim=0) if len(hfs) > 1 else used[hfs[0]]
           for spec, hfs in name_pairs(config)}  # qkv (3d, d) rows W^q; W^k; W^v and biases (3d,)
    return {k: v.to(dtype).contiguous() for k, v in out.items()}
