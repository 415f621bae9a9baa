"""A model's weight spec: its tensors by role and the settings an engine needs, nothing about its modules.

In the spirit of CTranslate2's model specs: an engine never reads a model's modules; it reads a ``ModelSpec``.
Each architecture maps its own tensor names to the spec's in one table (``architectures.py``; a checkpoint format's
in ``pretrained/marian/layout.py`` and ``pretrained/bert_layout.py``), and every engine runs every architecture
that has such a table.

The spec's tensors have flat names, the same for every architecture (``names``):

    source_embedding, target_embedding          (V, d) token tables (unscaled)
    output.weight, output.bias                  (V, d), (V,): the logits' projection and fixed bias (a speech
                                                model's: its CTC head over the encoder's output)
    length.weight, length.bias                  (2m + 1, d): a NAT model's length classifier
    token_types, embedding_norm.{weight,bias}   BERT's token-type table and the norm after the embeddings
    pooler.weight, pooler.bias                  BERT's pooler (tanh of it over the first token)
    {stack}.positions                           (P, d): added to the input rows (learned, or a sinusoidal table)
    {stack}.norm.{weight,bias}                  the stack's final LayerNorm
    {stack}.layers.{i}.{field}.{weight,bias}    per layer (``LINEARS``, ``NORMS``), stack "encoder" or "decoder"
    speech.mean, speech.std                     (n_mels,): a speech model's feature statistics
    speech.convs.{i}.{weight,bias}              its front end's convolutions of stride 2 (``Speech``)
    speech.project.{weight,bias}                (d, C F'): the conv2d front end's projection to d
    speech.ctc_norm.{weight,bias}               the norm of layer k's output under the CTC head (``ctc_layer`` k)
    speech.memory_positions                     (P, d): the sinusoidal table added to the decoder's memory

A layer's linear layers are W (out, in) and b (out,): ``qkv`` (3d, d) rows W^q; W^k; W^v of self-attention,
``self_out``, ``cross_qkv`` (3d, d) of cross-attention (queries from the decoder, keys and values from the
memory), ``cross_out``, ``ff1`` (d_ff, d), ``ff2`` (d, d_ff); its norms ``self_norm``, ``cross_norm``, ``ff_norm``
(post-LN: after each block's residual sum; pre-LN: before the block).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..functional.positional import rotary_cos_sin, sinusoidal_table

__all__ = ["Linear", "Norm", "Positions", "Layer", "CrossAttention", "Stack", "Settings", "Speech", "ModelSpec",
           "LINEARS", "NORMS", "layer_names", "POSITION_KINDS"]

LINEARS = ("qkv", "self_out", "cross_qkv", "cross_out", "ff1", "ff2")
NORMS = ("self_norm", "cross_norm", "ff_norm")
POSITION_KINDS = ("none", "sinusoidal", "learned", "rope")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")


@dataclass(frozen=True)
class Linear:
    """x W^T + b: weight (out, in), bias (out,) or None. int8 weights (``quant.py``) carry ``scale`` (out,):
    W = weight * scale[:, None]."""

    weight: Tensor
    bias: Tensor | None = None
    scale: Tensor | None = None

    @property
    def out_features(self) -> int:
        return self.weight.shape[0]

    def rows(self, start: int, stop: int) -> Linear:
        """Outputs [start, stop) of this layer (e.g. the queries of a packed Q, K, V projection)."""
        return Linear(self.weight[start:stop], None if self.bias is None else self.bias[start:stop],
                      None if self.scale is None else self.scale[start:stop])


@dataclass(frozen=True)
class Norm:
    """LayerNorm over the last dim: weight, bias (d,) or None, eps."""

    weight: Tensor | None
    bias: Tensor | None
    eps: float

    @property
    def affine(self) -> bool:
        return self.weight is not None and self.bias is not None

    def __call__(self, x: Tensor) -> Tensor:
        return torch.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


@dataclass(frozen=True)
class Positions:
    """What a stack adds to its input rows: nothing, a learned table, or the sinusoidal table (a pure function of
    position: longer inputs extend it, as ``nn.Sinusoidal`` does). ``table`` (P, d). Or "rope": nothing added to
    the rows, the queries and keys of self-attention rotated (``nn.positional.Rotary``'s maths, ``base``)."""

    kind: str = "none"
    table: Tensor | None = None
    layout: str = "interleaved"
    base: float = 10000.0

    def rows(self, offset: int, end: int) -> Tensor:
        """The rows added at positions [offset, end): (end - offset, d); ValueError past a learned table."""
        table = self.table
        if end > table.shape[0]:
            if self.kind == "learned":
                raise ValueError(f"LearnedAbsolute: sequence needs positions up to {end} but the learned table "
                                 f"has max_len={table.shape[0]} (offset {offset})")
            table = sinusoidal_table(max(end, 2 * table.shape[0]), table.shape[1], self.base, layout=self.layout,
                                     device=table.device, dtype=table.dtype)
        return table[offset:end]

    def add(self, x: Tensor, offset: int = 0) -> Tensor:
        """x (..., L, d) + the rows of positions [offset, offset + L) (``nn.positional``'s maths)."""
        if self.kind in ("none", "rope"):
            return x
        rows = self.rows(offset, offset + x.shape[-2])
        return x + (rows if rows.dtype == x.dtype else rows.to(x.dtype))

    def rotary(self, length: int, head_dim: int, device=None) -> tuple[Tensor, Tensor] | None:
        """For kind "rope", the cos, sin tables (length, head_dim / 2) of positions [0, length), made once for all
        the layers of a call; else None."""
        if self.kind != "rope":
            return None
        return rotary_cos_sin(torch.arange(length, device=device), head_dim, self.base)


@dataclass(frozen=True)
class CrossAttention:
    """A decoder layer's attention to the encoder's memory: ``qkv`` (3d, d) rows W^q (the decoder's queries);
    W^k; W^v (the memory's keys and values), its output projection and its norm."""

    qkv: Linear
    out: Linear
    norm: Norm


@dataclass(frozen=True)
class Layer:
    """One Transformer layer's weights by role (see the module doc); ``cross`` None in an encoder layer."""

    qkv: Linear
    self_out: Linear
    self_norm: Norm
    ff1: Linear
    ff2: Linear
    ff_norm: Norm
    cross: CrossAttention | None = None


@dataclass(frozen=True)
class Stack:
    layers: tuple[Layer, ...]
    norm: Norm | None = None  # the final LayerNorm (pre-LN stacks), or none
    positions: Positions = field(default_factory=Positions)


@dataclass(frozen=True)
class Settings:
    """What an engine needs besides the tensors. ``architecture``: "seq2seq", "nat" or "bert";
    ``activation``: the feed-forward's ("relu", "gelu", "gelu_tanh", "silu"); ``embed_scale``: the token tables'
    factor (sqrt(d) or 1); ``head_dim`` d / num_heads; attention ``scale`` head_dim ** -0.5."""

    architecture: str
    d_model: int
    num_heads: int
    norm_first: bool
    activation: str
    embed_scale: float = 1.0

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"Settings: `activation` must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.num_heads < 1 or self.d_model % self.num_heads:
            raise ValueError(f"Settings: `num_heads` {self.num_heads} must divide d_model {self.d_model}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def scale(self) -> float:
        return self.head_dim ** -0.5


@dataclass(frozen=True)
class Speech:
    """A speech recogniser's input side and CTC tap (``models.asr``). The frames (B, T, n_mels) are normalised by
    the feature statistics ``mean`` and ``std`` (n_mels,), then go through the front end: ``convs``, each of
    stride 2 in time after ``time_pad`` (before, after) frames of zeros and a GELU (``kind`` "conv1d": weight
    (d, C, k) over time; "conv2d": (C', C, k, 3) over time and frequency, then ``project`` (d, C F')). The mask
    rule of the encoder's self-attention: the padding, and with ``window`` (left, right) only the steps that near
    each query (``models.asr.encoder_mask``). The CTC head reads layer ``ctc_layers``' output through
    ``ctc_norm`` (None: the last layer's, after the encoder's final norm). The decoder's memory is the encoder's
    output plus ``memory_positions``."""

    kind: str
    mean: Tensor
    std: Tensor
    convs: tuple[Linear, ...]
    time_pad: tuple[int, int]
    window: tuple[int, int] | None
    ctc_layers: int
    memory_positions: Positions
    project: Linear | None = None
    ctc_norm: Norm | None = None


@dataclass(frozen=True)
class ModelSpec:
    """A model as every engine reads it: the settings and the tensors by role (see the module doc). ``config``: the
    model's config (a frozen dataclass), whose ids and limits the decoding protocol reads as ``engine.config``;
    ``speech``: a speech model's input side."""

    settings: Settings
    encoder: Stack
    source_embedding: Tensor | None = None  # None: a speech model (its encoder reads the front end's vectors)
    decoder: Stack | None = None
    target_embedding: Tensor | None = None
    output: Linear | None = None
    length: Linear | None = None
    token_types: Tensor | None = None
    embedding_norm: Norm | None = None
    pooler: Linear | None = None
    config: object = None
    speech: Speech | None = None

    @property
    def shares_tables(self) -> bool:
        """One table for the source and the target tokens."""
        return self.target_embedding is self.source_embedding


def layer_names(stack: str, i: int, cross: bool) -> list[str]:
    """The flat names of layer i of ``stack``'s tensors (see the module doc)."""
    fields = [f for f in LINEARS + NORMS if cross or not f.startswith("cross")]
    return [f"{stack}.layers.{i}.{f}.{p}" for f in fields for p in ("weight", "bias")]
