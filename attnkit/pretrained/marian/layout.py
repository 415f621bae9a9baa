"""Hugging Face Marian (``MarianMTModel``) <-> attnkit's weight spec: config fields and weight names.

Marian is a post-LN Transformer with sinusoidal positions in the "halves" layout (all sines, then all
cosines, from position 0), embeddings scaled by sqrt(d_model), a fixed ``final_logits_bias`` and the
decoder started from the pad token. Its query / key / value projections are separate matrices; the spec
packs them into one ``qkv`` (rows W^q; W^k; W^v). ``MARIAN_LAYER`` maps a layer's spec fields to Marian's
modules, and both directions use it (load: Marian -> spec -> the model through ``inference.model_state``;
export: the model -> spec through ``inference.spec_tensors`` -> Marian), so they cannot drift apart.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ...models.seq2seq import Seq2SeqConfig
from ...nn import TransformerConfig

__all__ = ["ACTIVATIONS", "EXPORT_ACTIVATIONS", "MARIAN_LAYER", "marian_config", "layer_names", "name_pairs",
           "hf_to_spec", "spec_to_hf", "expected_shapes"]

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


# Per layer: the spec's field (``inference.spec``) -> Marian's module(s), weights and biases alike; three modules are
# Marian's W^q, W^k, W^v of the spec's one packed projection.
MARIAN_LAYER = {"qkv": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
                "self_out": ("self_attn.out_proj",), "self_norm": ("self_attn_layer_norm",),
                "cross_qkv": ("encoder_attn.q_proj", "encoder_attn.k_proj", "encoder_attn.v_proj"),
                "cross_out": ("encoder_attn.out_proj",), "cross_norm": ("encoder_attn_layer_norm",),
                "ff1": ("fc1",), "ff2": ("fc2",), "ff_norm": ("final_layer_norm",)}
ATTENTION = ("self_attn", "encoder_attn")  # Marian's attention modules (encoder_attn: the decoder's only)


def layer_names(config: Seq2SeqConfig):
    """Yield (Hugging Face prefix, spec prefix, {spec field: Marian modules}) per layer."""
    tc = config.transformer
    for stack, n in (("encoder", tc.num_encoder_layers), ("decoder", tc.num_decoder_layers)):
        fields = {f: m for f, m in MARIAN_LAYER.items() if stack == "decoder" or not f.startswith("cross")}
        for i in range(n):
            yield f"model.{stack}.layers.{i}", f"{stack}.layers.{i}", fields


def name_pairs(config: Seq2SeqConfig):
    """Yield (spec name, [Hugging Face names]) of every per-layer tensor: one name, or W^q, W^k, W^v packed."""
    for hf, spec, fields in layer_names(config):
        for p in ("weight", "bias"):
            for field, modules in fields.items():
                yield f"{spec}.{field}.{p}", [f"{hf}.{m}.{p}" for m in modules]


def expected_shapes(config: Seq2SeqConfig) -> dict[str, tuple[int, ...]]:
    """Hugging Face name -> shape of every per-layer tensor a checkpoint of ``config`` must hold."""
    d, f = config.transformer.d_model, config.transformer.d_ff
    outputs = {"ff1": f}  # a module's outputs (every other has d); ff2 reads f inputs, the norms are (d,)
    shapes = {}
    for spec, hfs in name_pairs(config):
        field, p = spec.split(".")[-2:]
        w = (d,) if field.endswith("norm") else (outputs.get(field, d), f if field == "ff2" else d)
        for h in hfs:
            shapes[h] = w if p == "weight" else (w[0],)
    return shapes


def hf_to_spec(state: dict[str, Tensor], config: Seq2SeqConfig) -> dict[str, Tensor]:
    """Per-layer tensors, Hugging Face names -> spec names (q, k, v packed). Shapes are checked before."""
    return {spec: torch.cat([state[h] for h in hfs]) for spec, hfs in name_pairs(config)}


def spec_to_hf(tensors: dict[str, Tensor], config: Seq2SeqConfig) -> dict[str, Tensor]:
    """The inverse of ``hf_to_spec``: per-layer tensors with Hugging Face names (qkv split in three)."""
    return {h: part for spec, hfs in name_pairs(config) for h, part in zip(hfs, tensors[spec].chunk(len(hfs)))}
