"""Each architecture's spec mapping: its tensor names -> the spec's (``spec.py``), one table per architecture.

An ``Architecture`` says where each of the spec's tensors is among a model's named parameters and buffers
(``top``: the first name present wins, which is how shared and tied tables read; ``stacks``: per layer, the
spec's field -> the layer's module) and which settings its config gives. ``spec_of(model)`` reads a model
through its table; ``model_state(spec_tensors, model)`` goes the other way (a checkpoint mapped to the spec,
e.g. Marian's, into an attnkit model). Adding an architecture is one table here (and its model class in
``ARCHITECTURES``): every engine then runs it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..models.asr import AsrModel
from ..models.asr_frontend import SUBSAMPLES, time_pad
from ..models.bert import BertModel
from ..models.nat import NATModel
from ..models.seq2seq import Seq2SeqModel
from .spec import LINEARS, CrossAttention, Layer, Linear, ModelSpec, Norm, Positions, Settings, Speech, Stack

__all__ = ["Architecture", "ARCHITECTURES", "architecture_of", "spec_of", "spec_tensors", "model_state",
           "Unsupported", "dtype_of", "reference_in"]

# per layer: the spec's field -> the layer's module (its .weight and .bias)
ENCODER_LAYER = {"qkv": "self_attn.in_proj", "self_out": "self_attn.out_proj", "self_norm": "attn_block.norm",
                 "ff1": "ff.linear1", "ff2": "ff.linear2", "ff_norm": "ff_block.norm"}
DECODER_LAYER = {"qkv": "self_attn.in_proj", "self_out": "self_attn.out_proj", "self_norm": "self_block.norm",
                 "cross_qkv": "cross_attn.in_proj", "cross_out": "cross_attn.out_proj",
                 "cross_norm": "cross_block.norm", "ff1": "ff.linear1", "ff2": "ff.linear2", "ff_norm": "ff_block.norm"}


class Unsupported(ValueError):
    """A model an engine cannot run (the reason is the message)."""


@dataclass(frozen=True)
class Architecture:
    """One architecture's table: ``top`` spec name -> the model's names (first present wins), ``stacks`` spec stack
    -> (the model's prefix of its layers, per-layer table), ``settings(config)`` -> (Settings, LayerNorm eps,
    {stack: (position kind, sinusoidal layout)}), ``check(config)`` -> why an engine cannot run it, or None;
    ``parts(config, tensors, eps)`` -> the spec's parts of this architecture alone (a speech model's ``speech``)."""

    name: str
    top: dict[str, tuple[str, ...]]
    stacks: dict[str, tuple[str, dict[str, str]]]
    settings: Callable
    check: Callable
    parts: Callable = lambda config, tensors, eps: {}

    def names(self, present) -> dict[str, str]:
        """spec name -> the model's name, for the names ``present`` holds."""
        out = {}
        for spec_name, candidates in self.top.items():
            found = next((c for c in candidates if c in present), None)
            if found is not None:
                out[spec_name] = found
        for stack, (prefix, table) in self.stacks.items():
            i = 0
            while f"{prefix}.{i}.{table['qkv']}.weight" in present:
                for field, module in table.items():
                    for p in ("weight", "bias"):
                        if f"{prefix}.{i}.{module}.{p}" in present:
                            out[f"{stack}.layers.{i}.{field}.{p}"] = f"{prefix}.{i}.{module}.{p}"
                i += 1
        return out


def _seq2seq_settings(cfg, name: str):
    tc = cfg.transformer
    positions = {s: (tc.positional, tc.sinusoidal_layout) for s in ("encoder", "decoder")}
    scale = tc.d_model ** 0.5 if cfg.scale_embedding else 1.0
    return Settings(name, tc.d_model, tc.num_heads, tc.norm_first, tc.activation, scale), tc.layer_norm_eps, positions


def _seq2seq_check(cfg) -> str | None:
    tc = cfg.transformer
    if tc.positional not in ("sinusoidal", "learned", "none"):
        return f"positions inside attention ({tc.positional}); the engines add input positions only"
    if not tc.bias:
        return "a model without biases (bias=False)"
    return None


def _bert_settings(cfg, name: str):
    tc = cfg.encoder_config()
    return (Settings(name, tc.d_model, tc.num_heads, False, tc.activation), tc.layer_norm_eps,
            {"encoder": ("learned", "interleaved")})


_STACKS = {"encoder": ("encoder.layers", ENCODER_LAYER), "decoder": ("decoder.layers", DECODER_LAYER)}
_SEQ2SEQ_TOP = {
    "source_embedding": ("src_embed.weight",),
    "target_embedding": ("tgt_embed.weight", "src_embed.weight"),
    "output.weight": ("lm_head.weight", "tgt_embed.weight", "src_embed.weight"),
    "output.bias": ("final_logits_bias",),
    **{f"{s}.positions": (f"{s}.position.table", f"{s}.position.embedding.weight") for s in ("encoder", "decoder")},
    **{f"{s}.norm.{p}": (f"{s}.norm.{p}",) for s in ("encoder", "decoder") for p in ("weight", "bias")},
}
SEQ2SEQ = Architecture("seq2seq", _SEQ2SEQ_TOP, _STACKS, lambda c: _seq2seq_settings(c, "seq2seq"), _seq2seq_check)
NAT = Architecture("nat", {**_SEQ2SEQ_TOP, "length.weight": ("length_head.weight",),
                           "length.bias": ("length_head.bias",)}, _STACKS, lambda c: _seq2seq_settings(c, "nat"),
                   _seq2seq_check)
BERT = Architecture("bert", {
    "source_embedding": ("embeddings.word_embeddings.weight",),
    "encoder.positions": ("embeddings.position_embeddings.weight",),
    "token_types": ("embeddings.token_type_embeddings.weight",),
    "embedding_norm.weight": ("embeddings.norm.weight",), "embedding_norm.bias": ("embeddings.norm.bias",),
    "pooler.weight": ("pooler.dense.weight",), "pooler.bias": ("pooler.dense.bias",),
}, {"encoder": ("encoder.layers", ENCODER_LAYER)}, lambda c: _bert_settings(c, "bert"), lambda c: None)


def _asr_settings(cfg):
    tc = cfg.encoder
    return (Settings("asr", tc.d_model, tc.num_heads, tc.norm_first, tc.activation), tc.layer_norm_eps,
            {"encoder": (tc.positional, tc.sinusoidal_layout)})


def _asr_check(cfg) -> str | None:
    tc = cfg.encoder
    if tc.positional not in ("rope", "none"):
        return f"encoder positions {tc.positional!r}; the speech engine runs rope or none"
    if not tc.bias:
        return "a model without biases (bias=False)"
    return None


def _speech(cfg, t: dict, eps: float) -> dict:
    """A speech model's ``Speech`` from its spec-named tensors and config."""
    convs = tuple(_linear(t, f"speech.convs.{i}") for i in range(_CONVS) if f"speech.convs.{i}.weight" in t)
    memory = Positions("sinusoidal", t["speech.memory_positions"], "interleaved")
    pad = time_pad(cfg.kernel, cfg.streaming)
    return {"speech": Speech(cfg.frontend, t["speech.mean"], t["speech.std"], convs, pad, cfg.window, cfg.ctc_layers,
                             memory, _linear(t, "speech.project"), _norm(t, "speech.ctc_norm", eps))}


# a speech model's encoder, front end and CTC head (its decoder stays on the reference modules: ``asr.py``)
_CONVS = SUBSAMPLES[-1].bit_length() - 1  # the most convolutions of stride 2 a front end has
ASR = Architecture("asr", {
    "output.weight": ("ctc_head.weight",), "output.bias": ("ctc_head.bias",),
    **{f"encoder.norm.{p}": (f"encoder.norm.{p}",) for p in ("weight", "bias")},
    "speech.mean": ("feature_mean",), "speech.std": ("feature_std",),
    **{f"speech.convs.{i}.{p}": (f"frontend.conv{i + 1}.{p}",) for i in range(_CONVS) for p in ("weight", "bias")},
    **{f"speech.project.{p}": (f"frontend.proj.{p}",) for p in ("weight", "bias")},
    **{f"speech.ctc_norm.{p}": (f"ctc_norm.{p}",) for p in ("weight", "bias")},
    "speech.memory_positions": ("memory_position.table",),
}, {"encoder": ("encoder.layers", ENCODER_LAYER)}, _asr_settings, _asr_check, _speech)

ARCHITECTURES: dict[type, Architecture] = {Seq2SeqModel: SEQ2SEQ, NATModel: NAT, BertModel: BERT, AsrModel: ASR}


def architecture_of(model) -> Architecture:
    """The table of ``model``'s class; Unsupported for a model no table describes, or one it cannot run."""
    arch = next((ARCHITECTURES[c] for c in type(model).__mro__ if c in ARCHITECTURES), None)
    if arch is None:
        raise Unsupported(f"no weight spec for a {type(model).__name__} (architectures: "
                          f"{', '.join(c.__name__ for c in ARCHITECTURES)})")
    why = arch.check(model.config)
    if why is not None:
        raise Unsupported(why)
    return arch


def spec_tensors(model: nn.Module, dtype: torch.dtype | None = None) -> dict[str, Tensor]:
    """The model's tensors by spec name (detached; converted to ``dtype`` where given)."""
    named = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    out, seen = {}, {}
    for spec_name, name in architecture_of(model).names(named).items():
        if name not in seen:  # a shared or tied table: one tensor under both spec names
            t = named[name].detach()
            seen[name] = t if dtype is None or t.dtype == dtype else t.to(dtype)
        out[spec_name] = seen[name]
    return out


def _linear(t: dict, name: str) -> Linear | None:
    return Linear(t[f"{name}.weight"], t.get(f"{name}.bias")) if f"{name}.weight" in t else None


def _norm(t: dict, name: str, eps: float) -> Norm | None:
    w, b = t.get(f"{name}.weight"), t.get(f"{name}.bias")
    return None if w is None and b is None else Norm(w, b, eps)


def _stack(t: dict, stack: str, eps: float, positions: tuple[str, str]) -> Stack:
    layers, i = [], 0
    while f"{stack}.layers.{i}.qkv.weight" in t:
        p = f"{stack}.layers.{i}"
        linears = {f: _linear(t, f"{p}.{f}") for f in LINEARS}
        missing = [f for f in ("qkv", "self_out", "ff1", "ff2") if linears[f] is None]
        if missing:
            raise Unsupported(f"{p}: no {', '.join(missing)} (attention that is not one packed projection)")
        norms = {f: _norm(t, f"{p}.{f}", eps) for f in ("self_norm", "cross_norm", "ff_norm")}
        q, out = linears.pop("cross_qkv"), linears.pop("cross_out")
        cross = None if q is None else CrossAttention(q, out, norms.pop("cross_norm"))
        norms.pop("cross_norm", None)
        layers.append(Layer(**linears, **norms, cross=cross))
        i += 1
    kind, layout = positions
    table = t.get(f"{stack}.positions") if kind in ("sinusoidal", "learned") else None
    if table is not None:
        pos = Positions(kind, table, layout)
    else:  # rotary positions live in the attention, not in a table; anything else adds nothing
        pos = Positions("rope" if kind == "rope" else "none")
    return Stack(tuple(layers), _norm(t, f"{stack}.norm", eps), pos)


def spec_of(model: nn.Module, dtype: torch.dtype | None = None) -> ModelSpec:
    """``model`` as a ``ModelSpec`` (its tensors in ``dtype`` where given; the model itself is not changed)."""
    arch = architecture_of(model)
    settings, eps, positions = arch.settings(model.config)
    t = spec_tensors(model, dtype)
    stacks = {s: _stack(t, s, eps, positions[s]) for s in arch.stacks}
    norm = _norm(t, "embedding_norm", eps)
    return ModelSpec(settings, stacks["encoder"], t.get("source_embedding"), stacks.get("decoder"),
                     t.get("target_embedding"), _linear(t, "output"), _linear(t, "length"), t.get("token_types"), norm,
                     _linear(t, "pooler"), model.config, **arch.parts(model.config, t, eps))


def model_state(tensors: dict[str, Tensor], model: nn.Module) -> dict[str, Tensor]:
    """Spec-named tensors -> ``model``'s state dict names (for ``load_state_dict``): each of the model's tensors
    from the first spec name whose table entry names it first among the model's own."""
    own = model.state_dict()
    state = {}
    for spec_name, name in architecture_of(model).names(own).items():
        if name not in state and spec_name in tensors:
            state[name] = tensors[spec_name]
    return state


def dtype_of(model: nn.Module) -> torch.dtype:
    """The dtype of the model's parameters."""
    return next(model.parameters()).dtype


def reference_in(model: nn.Module, dtype: torch.dtype | None) -> nn.Module:
    """``model`` in eval mode in ``dtype`` (None: its own): the model itself, or a copy in another dtype (the
    reference an engine hands what it does not run)."""
    model.eval()
    return model if dtype is None or dtype == dtype_of(model) else copy.deepcopy(model).to(dtype).eval()
