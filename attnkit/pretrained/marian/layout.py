"""Hugging Face Marian (``MarianMTModel``) <-> attnkit ``Seq2SeqModel``: config fields and weight names.

Marian is a post-LN Transformer with sinusoidal positions in the "halves" layout (all sines, then all
cosines, from position 0), embeddings scaled by sqrt(d_model), a fixed ``final_logits_bias`` and the
decoder started from the pad token. Its query / key / value projections are separate matrices; attnkit
packs them into one ``in_proj`` (rows W^q; W^k; W^v). Both directions (load and export) use the name
table below, so they cannot drift apart.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ...models.seq2seq import Seq2SeqConfig
from ...nn import TransformerConfig

__all__ = ["ACTIVATIONS", "EXPORT_ACTIVATIONS", "marian_config", "layer_names", "hf_to_attnkit", "attnkit_to_hf",
           "expected_shapes"]

# Hugging Face activation_function -> attnkit activation.
ACTIVATIONS = {"swish": "silu", "silu": "silu", "gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh"}
EXPORT_ACTIVATIONS = {"silu": "swish", "gelu": "gelu", "relu": "relu", "gelu_tanh": "gelu_new"}
# Keys of old (transformers 3, BART-derived) Marian configs that would change the architecture.
_MUST_BE_FALSE = ("normalize_before", "add_final_layer_norm", "normalize_embedding", "add_bias_logits")


def _int(hf: dict, key: str, source: str, default: Any = None) -> int:
    v = hf.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ValueError(f"{source}: `{key}` must be a positive integer, got {v!r}")
    return v


def _token(hf: dict, key: str, source: str) -> int | None:
    v = hf.get(key)
    if isinstance(v, list):
        if len(v) != 1:
            raise ValueError(f"{source}: `{key}` must be one token id, got {v!r}")
        v = v[0]
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
        raise ValueError(f"{source}: `{key}` must be a token id, got {v!r}")
    return v


def marian_config(hf: dict, *, source: str, share_embeddings: bool, tie_output: bool) -> Seq2SeqConfig:
    """A Marian ``config.json`` (dict) -> ``Seq2SeqConfig``; ValueError naming ``source`` for what we cannot run.

    Sharing is decided by the weights (equal tables are shared), so it is passed in.
    """
    model_type = hf.get("model_type")
    archs = hf.get("architectures") or ["MarianMTModel"]
    if model_type != "marian" or archs != ["MarianMTModel"]:
        raise ValueError(f"{source}: unsupported architecture: model_type {model_type!r}, architectures {archs}; "
                         "attnkit reads Marian encoder-decoders (model_type 'marian', MarianMTModel)")
    on = [k for k in _MUST_BE_FALSE if hf.get(k)]
    if on:
        raise ValueError(f"{source}: unsupported Marian variant: {', '.join(f'{k}=true' for k in on)}")
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if hf.get(a) != hf.get(b):
            raise ValueError(f"{source}: `{a}` ({hf.get(a)}) and `{b}` ({hf.get(b)}) differ; attnkit's stacks "
                             "share one size")
    act = hf.get("activation_function", "gelu")
    if not isinstance(act, str) or act not in ACTIVATIONS:
        raise ValueError(f"{source}: unsupported activation_function {act!r} (supported: {sorted(ACTIVATIONS)})")
    vocab = _int(hf, "vocab_size", source)
    dec_vocab = hf.get("decoder_vocab_size") or vocab
    max_pos = _int(hf, "max_position_embeddings", source, 1024)
    pad = _token(hf, "pad_token_id", source)
    eos = _token(hf, "eos_token_id", source)
    if pad is None or eos is None:
        raise ValueError(f"{source}: `pad_token_id` and `eos_token_id` must be set")
    start = _token(hf, "decoder_start_token_id", source)
    bos = _token(hf, "bos_token_id", source)
    try:
        tc = TransformerConfig(d_model=_int(hf, "d_model", source),
                               num_heads=_int(hf, "encoder_attention_heads", source),
                               d_ff=_int(hf, "encoder_ffn_dim", source),
                               num_encoder_layers=_int(hf, "encoder_layers", source),
                               num_decoder_layers=_int(hf, "decoder_layers", source), dropout=0.0,
                               activation=ACTIVATIONS[act], norm_first=False, final_norm=False,
                               positional="sinusoidal", sinusoidal_layout="halves", max_len=max_pos)
        return Seq2SeqConfig(vocab, _int(hf, "decoder_vocab_size", source, dec_vocab), tc, pad_token_id=pad,
                             bos_token_id=pad if bos is None else bos, eos_token_id=eos,
                             decoder_start_token_id=pad if start is None else start,
                             share_embeddings=share_embeddings, tie_output=tie_output,
                             scale_embedding=bool(hf.get("scale_embedding", False)), final_logits_bias=True,
                             max_positions=max_pos)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None


# Per layer: Hugging Face module -> attnkit module (weights and biases alike); attention handled apart.
_ENCODER = {"self_attn.out_proj": "self_attn.out_proj", "self_attn_layer_norm": "attn_block.norm",
            "fc1": "ff.linear1", "fc2": "ff.linear2", "final_layer_norm": "ff_block.norm"}
_DECODER = {"self_attn.out_proj": "self_attn.out_proj", "self_attn_layer_norm": "self_block.norm",
            "encoder_attn.out_proj": "cross_attn.out_proj", "encoder_attn_layer_norm": "cross_block.norm",
            "fc1": "ff.linear1", "fc2": "ff.linear2", "final_layer_norm": "ff_block.norm"}
_ATTENTION = {"encoder": {"self_attn": "self_attn"},
              "decoder": {"self_attn": "self_attn", "encoder_attn": "cross_attn"}}


def layer_names(config: Seq2SeqConfig):
    """Yield (hf_prefix, attnkit_prefix, plain {hf: ours}, attention {hf: ours}) per layer."""
    tc = config.transformer
    for stack, n, plain in (("encoder", tc.num_encoder_layers, _ENCODER), ("decoder", tc.num_decoder_layers, _DECODER)):
        for i in range(n):
            yield f"model.{stack}.layers.{i}", f"{stack}.layers.{i}", plain, _ATTENTION[stack]


def expected_shapes(config: Seq2SeqConfig) -> dict[str, tuple[int, ...]]:
    """Hugging Face name -> shape of every per-layer tensor a checkpoint of ``config`` must hold."""
    d, f = config.transformer.d_model, config.transformer.d_ff
    sizes = {"self_attn.out_proj": (d, d), "encoder_attn.out_proj": (d, d), "fc1": (f, d), "fc2": (d, f)}
    shapes = {}
    for hf, _, plain, attn in layer_names(config):
        for name in plain:
            w = sizes.get(name, (d,))
            shapes[f"{hf}.{name}.weight"], shapes[f"{hf}.{name}.bias"] = w, (w[0],)
        for name in attn:
            for p in "qkv":
                shapes[f"{hf}.{name}.{p}_proj.weight"], shapes[f"{hf}.{name}.{p}_proj.bias"] = (d, d), (d,)
    return shapes


def name_pairs(config: Seq2SeqConfig):
    """Yield (attnkit name, [Hugging Face names]) of every per-layer tensor: one name, or W^q, W^k, W^v packed."""
    for hf, ours, plain, attn in layer_names(config):
        for p in ("weight", "bias"):
            for a, b in plain.items():
                yield f"{ours}.{b}.{p}", [f"{hf}.{a}.{p}"]
            for a, b in attn.items():
                yield f"{ours}.{b}.in_proj.{p}", [f"{hf}.{a}.{x}_proj.{p}" for x in "qkv"]


def hf_to_attnkit(state: dict[str, Tensor], config: Seq2SeqConfig) -> dict[str, Tensor]:
    """Per-layer tensors, Hugging Face names -> attnkit names (q, k, v packed). Shapes are checked before."""
    return {ours: torch.cat([state[h] for h in hfs]) for ours, hfs in name_pairs(config)}


def attnkit_to_hf(state: dict[str, Tensor], config: Seq2SeqConfig) -> dict[str, Tensor]:
    """The inverse of ``hf_to_attnkit``: per-layer tensors with Hugging Face names (in_proj split in three)."""
    return {h: part for ours, hfs in name_pairs(config) for h, part in zip(hfs, state[ours].chunk(len(hfs)))}
