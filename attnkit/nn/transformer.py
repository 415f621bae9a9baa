"""Encoder, Decoder and the encoder-decoder Transformer, built from a ``TransformerConfig``.

These take vectors, not token ids: a task model puts its own embedding in front (words, pixels,
patches, audio frames, graph nodes: the lectures' "a set of vectors").
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn

from ..functional.masks import Mask
from .blocks import AttentionFactory, DecoderLayer, EncoderLayer, LayerCache
from .config import TransformerConfig
from .positional import input_position

__all__ = ["Encoder", "Decoder", "Transformer", "EncoderOutput", "DecoderOutput"]


class EncoderOutput(NamedTuple):
    last_hidden_state: Tensor  # (B, L, d)
    hidden_states: tuple[Tensor, ...] | None  # input of every layer + the final output: N + 1 of (B, L, d)
    attentions: tuple[Tensor, ...] | None  # per layer (B, H, L, L)


class DecoderOutput(NamedTuple):
    last_hidden_state: Tensor  # (B, T, d)
    self_attentions: tuple[Tensor, ...] | None  # per layer (B, H, T, T)
    cross_attentions: tuple[Tensor, ...] | None  # per layer (B, H, T, S)
    cache: list[LayerCache] | None


def _final_norm(config: TransformerConfig, device, dtype) -> nn.Module:
    if not config.use_final_norm:
        return nn.Identity()
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias, device=device, dtype=dtype)


class Encoder(nn.Module):
    """Input position (if any) + dropout, N encoder layers, optional final LayerNorm.

    ``attention``: how each layer builds its self-attention (``attnkit.nn.variants.attention_factory``)."""

    def __init__(self, config: TransformerConfig, *, attention: AttentionFactory | None = None, device=None,
                 dtype=None):
        super().__init__()
        self.config = config
        self.position = input_position(config, device=device, dtype=dtype)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(EncoderLayer(config, attention=attention, device=device, dtype=dtype)
                                    for _ in range(config.num_encoder_layers))
        self.norm = _final_norm(config, device, dtype)

    def forward(self, x: Tensor, mask: Mask | Tensor | None = None, *, need_weights: bool = False,
                output_hidden_states: bool = False, backend: str | None = None,
                num_layers: int | None = None) -> EncoderOutput:
        """x (B, L, d_model); ``mask`` True = may attend (e.g. ``masks.padding(lengths)``). ``num_layers``: only the
        first that many layers, without the final norm (an early exit); hidden_states[k] is the output of k layers."""
        if x.dim() != 3 or x.shape[-1] != self.config.d_model:
            raise ValueError(f"Encoder: `x` must have shape (B, L, {self.config.d_model}), got {tuple(x.shape)}")
        n = len(self.layers)
        if num_layers is not None and not 0 <= num_layers <= n:
            raise ValueError(f"Encoder: `num_layers` must be in [0, {n}], got {num_layers!r}")
        if self.position is not None:
            x = self.position(x)
        x = self.dropout(x)
        hidden, attn = [], []
        for layer in self.layers[:n if num_layers is None else num_layers]:
            if output_hidden_states:
                hidden.append(x)
            x, w = layer(x, mask, need_weights=need_weights, backend=backend)
            attn.append(w)
        if num_layers is None:
            x = self.norm(x)
        if output_hidden_states:
            hidden.append(x)
        return EncoderOutput(x, tuple(hidden) if output_hidden_states else None,
                             tuple(attn) if need_weights else None)


class Decoder(nn.Module):
    """Input position (if any) + dropout, N decoder layers, optional final LayerNorm."""

    def __init__(self, config: TransformerConfig, *, device=None, dtype=None):
        super().__init__()
        self.config = config
        self.position = input_position(config, device=device, dtype=dtype)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(DecoderLayer(config, device=device, dtype=dtype)
                                    for _ in range(config.num_decoder_layers))
        self.norm = _final_norm(config, device, dtype)

    def forward(self, x: Tensor, memory: Tensor | None, *, self_mask: Mask | Tensor | None = None,
                memory_mask: Mask | Tensor | None = None, is_causal: bool = True,
                cache: list[LayerCache] | None = None, use_cache: bool = False, need_weights: bool = False,
                backend: str | None = None) -> DecoderOutput:
        """x (B, T, d_model) target vectors, memory (B, S, d_model) the encoder's output.

        With ``cache`` (from a previous call with ``use_cache=True``), x holds only the new steps.
        ``memory_mask`` applies to the memory keys (e.g. the source padding).
        """
        if x.dim() != 3 or x.shape[-1] != self.config.d_model:
            raise ValueError(f"Decoder: `x` must have shape (B, T, {self.config.d_model}), got {tuple(x.shape)}")
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(f"Decoder: `cache` has {len(cache)} layers, the decoder {len(self.layers)}")
        offset = 0 if not cache or cache[0].self_kv is None else cache[0].self_kv.length
        if self.position is not None:
            x = self.position(x, offset)
        x = self.dropout(x)
        selfs, crosses, caches = [], [], []
        for i, layer in enumerate(self.layers):
            x, (ws, wc), c = layer(x, memory, self_mask=self_mask, memory_mask=memory_mask, is_causal=is_causal,
                                   cache=cache[i] if cache else None, use_cache=use_cache,
                                   need_weights=need_weights, backend=backend)
            selfs.append(ws)
            crosses.append(wc)
            caches.append(c)
        x = self.norm(x)
        keep = use_cache or cache is not None
        return DecoderOutput(x, tuple(selfs) if need_weights else None, tuple(crosses) if need_weights else None,
                             caches if keep else None)


class Transformer(nn.Module):
    """The encoder-decoder of "Attention Is All You Need", on vectors (B, S, d) and (B, T, d)."""

    def __init__(self, config: TransformerConfig, *, device=None, dtype=None):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config, device=device, dtype=dtype)
        self.decoder = Decoder(config, device=device, dtype=dtype)

    def forward(self, src: Tensor, tgt: Tensor, *, src_mask: Mask | Tensor | None = None,
                tgt_mask: Mask | Tensor | None = None, memory_mask: Mask | Tensor | None = None,
                is_causal: bool = True) -> Tensor:
        """src (B, S, d), tgt (B, T, d) -> (B, T, d).

        ``src_mask``: encoder self-attention (e.g. source padding). ``tgt_mask``: extra decoder
        self-attention mask, combined with the causal mask. ``memory_mask``: cross-attention; defaults
        to ``src_mask`` when that is a padding mask (the same keys are hidden).
        """
        memory = self.encoder(src, src_mask).last_hidden_state
        if memory_mask is None:
            memory_mask = src_mask
        return self.decoder(tgt, memory, self_mask=tgt_mask, memory_mask=memory_mask,
                            is_causal=is_causal).last_hidden_state
