"""Feed-forward block, encoder layer and decoder layer (post-LN as in the paper, or pre-LN)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch.nn.functional as F
from torch import Tensor, nn

from ..functional.masks import Mask, causal
from .attention import KVCache, MultiHeadAttention
from .config import TransformerConfig
from .positional import attention_position

__all__ = ["FeedForward", "EncoderLayer", "DecoderLayer", "LayerCache", "ACTIVATION_FNS", "AttentionFactory"]

AttentionFactory = Callable[..., nn.Module]  # (config, position, device, dtype) -> a MultiHeadAttention-like module

ACTIVATION_FNS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,  # x * sigmoid(x), Marian's "swish"
}


class FeedForward(nn.Module):
    """Position-wise FFN: W2 act(W1 x + b1) + b2, applied to every vector alone. (B, L, d) -> (B, L, d)."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0,
                 bias: bool = True, *, device=None, dtype=None):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias, device=device, dtype=dtype)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias, device=device, dtype=dtype)
        self.dropout = nn.Dropout(dropout)
        self.activation = activation
        self._act = ACTIVATION_FNS[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self._act(self.linear1(x))))


class _Residual(nn.Module):
    """x + dropout(f(x)) then LayerNorm (post-LN), or x + dropout(f(LayerNorm(x))) (pre-LN)."""

    def __init__(self, config: TransformerConfig, *, device=None, dtype=None):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias,
                                 device=device, dtype=dtype)
        self.dropout = nn.Dropout(config.dropout)
        self.norm_first = config.norm_first

    def forward(self, x: Tensor, sublayer) -> tuple[Tensor, object]:
        y, extra = sublayer(self.norm(x) if self.norm_first else x)
        x = x + self.dropout(y)
        return (x if self.norm_first else self.norm(x)), extra


def _mha(config: TransformerConfig, position, device, dtype) -> MultiHeadAttention:
    return MultiHeadAttention(config.d_model, config.num_heads, bias=config.bias, dropout=config.attention_dropout,
                              position=position, device=device, dtype=dtype)


class EncoderLayer(nn.Module):
    """Self-attention and FFN, each wrapped in residual + LayerNorm. (B, L, d) -> (B, L, d).

    ``attention``: builds the self-attention module, ``fn(config, position, device, dtype)``
    (default: ``MultiHeadAttention``); any module with MultiHeadAttention's call will do."""

    def __init__(self, config: TransformerConfig, *, attention: AttentionFactory | None = None, device=None,
                 dtype=None):
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        make = attention or _mha  # e.g. attnkit.nn.variants.attention_factory("performer")
        self.self_attn = make(config, attention_position(config, **fk), device, dtype)
        self.ff = FeedForward(config.d_model, config.d_ff, config.activation, config.activation_dropout, config.bias,
                              **fk)
        self.attn_block = _Residual(config, **fk)
        self.ff_block = _Residual(config, **fk)

    def forward(self, x: Tensor, mask: Mask | Tensor | None = None, *, need_weights: bool = False,
                backend: str | None = None) -> tuple[Tensor, Tensor | None]:
        """Returns (x (B, L, d), weights (B, H, L, L) or None)."""

        def attend(h):
            out = self.self_attn(h, mask=mask, need_weights=need_weights, backend=backend)
            return out.out, out.weights

        x, weights = self.attn_block(x, attend)
        x, _ = self.ff_block(x, lambda h: (self.ff(h), None))
        return x, weights


class LayerCache(NamedTuple):
    self_kv: KVCache | None
    cross_kv: KVCache | None


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder's memory, FFN; each with residual + LN."""

    def __init__(self, config: TransformerConfig, *, device=None, dtype=None):
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        self.self_attn = _mha(config, attention_position(config, **fk), device, dtype)
        self.cross_attn = _mha(config, None, device, dtype)
        self.ff = FeedForward(config.d_model, config.d_ff, config.activation, config.activation_dropout, config.bias,
                              **fk)
        self.self_block = _Residual(config, **fk)
        self.cross_block = _Residual(config, **fk)
        self.ff_block = _Residual(config, **fk)

    def forward(self, x: Tensor, memory: Tensor | None, *, self_mask: Mask | Tensor | None = None,
                memory_mask: Mask | Tensor | None = None, is_causal: bool = True, cache: LayerCache | None = None,
                use_cache: bool = False, need_weights: bool = False, backend: str | None = None
                ) -> tuple[Tensor, tuple[Tensor | None, Tensor | None], LayerCache | None]:
        """x (B, T, d), memory (B, S, d). Self-attention is causal unless ``is_causal=False`` (NAT).

        Returns (x, (self_weights, cross_weights), cache).
        """
        m = self_mask
        if is_causal:
            m = causal() if m is None else causal() & m
        self_kv = cross_kv = None
        keep = use_cache or cache is not None

        def self_attend(h):
            nonlocal self_kv
            out = self.self_attn(h, mask=m, need_weights=need_weights, cache=cache.self_kv if cache else None,
                                 use_cache=keep, backend=backend)
            self_kv = out.cache
            return out.out, out.weights

        def cross_attend(h):
            nonlocal cross_kv
            out = self.cross_attn(h, memory, memory, mask=memory_mask, need_weights=need_weights,
                                  cache=cache.cross_kv if cache else None, use_cache=keep, backend=backend)
            cross_kv = out.cache
            return out.out, out.weights

        x, w_self = self.self_block(x, self_attend)
        x, w_cross = self.cross_block(x, cross_attend)
        x, _ = self.ff_block(x, lambda h: (self.ff(h), None))
        return x, (w_self, w_cross), (LayerCache(self_kv, cross_kv) if keep else None)
