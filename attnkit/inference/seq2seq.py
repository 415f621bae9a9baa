"""The autoregressive engine: a ``Seq2SeqModel`` for decoding, read from its weight spec. Same protocol, same
outputs to float rounding, fewer kernels.

``Seq2SeqEngine(spec, model)`` answers ``encode`` / ``decode_step`` / ``reorder_cache`` like the model, so
``attnkit.generation.generate`` runs it unchanged (ideas from CTranslate2's decoder, written here):

- every linear layer is packed once (``PackedLinear``): oneDNN, and attnkit's ``small_linear`` for steps of up
  to 4 rows and, with W in panels, products of up to 32 rows (a beam of 5, a sentence): the decoder's fused
  Q, K, V projection, the feed-forward with its activation inside the first kernel, the residual added inside
  the output projections' kernels, the output layer with ``final_logits_bias`` as its bias;
- the self-attention keys and values go into preallocated buffers written in place, a beam search's moves
  reorder a row table instead of copying them, and the cross-attention keys and values are projected once and
  shared by a sentence's beams (``cache.py``);
- one decoding step is one token per row: a longer prefix is fed one token at a time; each layer of a step is
  one native call where the kernels run (``decoder_layer_step``: the same small_linear and short-attention
  kernels in one OpenMP region, the K, V cache written in place and read through the row table; W blocked up to
  4 rows, in panels past them: a beam search's batch), else the packed layer program (``layer.py``).

Attention runs the ``short`` backend's kernel (``layer.ShortAttention``), or ``attnkit.attention`` where that
backend does not run. The encoder is an ``EncoderStack``; unpadded sources of up to ``LAYER_ROWS`` positions (a
sentence) run its layers' native calls back to back. Weights are copied, never trained. With
``output_attentions`` or ``use_cache=False`` the step runs on the reference model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional import native as kernels
from ..functional.dispatch import SHORT_MAX_LEN
from ..functional.masks import for_heads
from ..models.seq2seq import StepOutput, check_ids, memory_mask_from
from . import native
from .cache import Buffers, StepCache, flatten, reorder
from .encoder import EncoderStack
from .layer import ShortAttention, kernel_lengths, memory_attention
from .packed import LAYER_ROWS, SMALL_ROWS
from .quant import cat_rows
from .quant_linear import linear_for, packed_layer
from .spec import ModelSpec

__all__ = ["Seq2SeqEngine", "StepCache"]


class Seq2SeqEngine:
    """The engine of an encoder-decoder's spec (see the module doc); ``model`` (the reference) is left as it is and
    answers the calls the engine does not run itself (attention weights, list caches), whole."""

    def __init__(self, spec: ModelSpec, model):
        s = spec.settings
        self.reference, self.config, self.settings = model, spec.config, s
        self.num_heads, self.head_dim, self.d_model, self.norm_first = s.num_heads, s.head_dim, s.d_model, s.norm_first
        self.encoder = EncoderStack(spec.encoder, s)
        self.attend = ShortAttention(spec.target_embedding.dtype, s.head_dim)
        self.buffers = Buffers()  # K/V buffers of the last finished decoding, for the next
        self._no_lengths = kernels.lengths_arg(None)
        self.target_table = spec.target_embedding * s.embed_scale  # scaled once
        self.src_table = (self.target_table if spec.shares_tables else spec.source_embedding * s.embed_scale)
        self.positions = spec.decoder.positions
        self.layers = [packed_layer(layer, s) for layer in spec.decoder.layers]  # int8 weights: ``QuantLayer``
        self.final_norm = spec.decoder.norm
        self.output = linear_for(spec.output)  # (V, d), final_logits_bias as its bias (int8 weights: ``QuantLinear``)
        # every layer's cross-attention K, V projection in one matrix: the memory is projected in one call
        kv = [layer.cross_kv for layer in self.layers]
        self.cross_kv = linear_for(cat_rows(kv))
        for lin in [self.output] + [m for layer in self.layers for m in layer.linears()]:
            lin.prepare_small()  # the steps' weights in the small kernel's layout now, not on the first step
        # one native call per layer and step where every layer fits it (else the packed program of each)
        weights = [native.layer_weights(m, panels=False) for m in self.layers] if self.attend.kernel else []
        self.step_weights = weights if weights and all(w is not None for w in weights) else None
        self.native_step = native.compositions().decoder_layer_step if self.step_weights is not None else None
        self._panel_weights: list | None = None  # W in panels for steps of more rows: panel_weights() makes it

    @property
    def _pool(self) -> list[Tensor]:
        return self.buffers.pool

    # -- the protocol --------------------------------------------------------------------------
    @torch.no_grad()
    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """input_ids (B, S), attention_mask (B, S) 1 = real token -> memory (B, S, d)."""
        check_ids(input_ids, "input_ids", self.config.src_vocab_size)
        b, s = input_ids.shape
        if (self.encoder.all_native and 0 < b * s <= LAYER_ROWS and s <= SHORT_MAX_LEN
                and (attention_mask is None or (attention_mask.shape == input_ids.shape
                                                and bool(attention_mask.all())))):
            return self.encode_unpadded(input_ids)
        x = F.embedding(input_ids, self.src_table)  # (B, S, d), already times sqrt(d)
        return self.encoder(x, memory_mask_from(attention_mask, s))

    def encode_unpadded(self, input_ids: Tensor) -> Tensor:
        """input_ids (B, S) with no padding, B * S <= LAYER_ROWS -> memory (B, S, d): the embedding, the layers'
        native calls (``EncoderStack.unpadded``) and the final norm (a sentence's latency). ``encode``'s other path,
        the packed layer program, is its reference."""
        x = self.encoder.positions.add(F.embedding(input_ids, self.src_table))  # (B, S, d) + P[:S]
        x = self.encoder.unpadded(x)
        return x if self.encoder.norm is None else self.encoder.norm(x)

    @torch.no_grad()
    def decode_step(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
                    cache: StepCache | None = None, *, use_cache: bool = True,
                    output_attentions: bool = False) -> StepOutput:
        """tokens (B, t) -> logits (B, V) of the last position and the updated ``StepCache``."""
        if output_attentions or not use_cache or isinstance(cache, list):
            return self.reference.decode_step(tokens, memory, memory_mask, cache, use_cache=use_cache,
                                              output_attentions=output_attentions)
        check_ids(tokens, "tokens", self.config.tgt_vocab_size)
        if cache is None:
            cache = self.new_cache(memory, tokens.shape[0])
        if cache.group == 1 and cache.mask_source is not memory_mask:
            cache.mask_source, cache.mask = memory_mask, for_heads(memory_mask_from(memory_mask, memory.shape[1]))
        logits = None
        for j in range(tokens.shape[1]):
            logits = self.step(tokens[:, j], cache)
        return StepOutput(logits, cache, None)

    def reorder_cache(self, cache: StepCache, index: Tensor, *, cross: bool = True) -> StepCache:
        """Row i of the new cache is row ``index[i]`` of the old (beam search moves, finished rows leave).

        ``cache`` is spent: its buffers are overwritten by the next call (they are reused, not reallocated).
        When every cache of a decoding is gone, its buffers go to this engine's pool and the next decoding
        writes into them: copy what you keep of a cache's tensors.
        """
        if isinstance(cache, list):
            return self.reference.reorder_cache(cache, index, cross=cross)
        table = self.attend.kernel is not None and cache.length < SHORT_MAX_LEN  # the next step reads through rows
        return reorder(self.buffers, cache, index, cross, table)

    # -- internals -----------------------------------------------------------------------------
    def cross_keys_values(self, memory: Tensor) -> tuple[list[Tensor], list[Tensor]]:
        """memory (B, S, d) -> per layer the cross-attention keys and values, (B, H, S, dh) views of one
        projection of the memory by every layer's K, V weights at once."""
        b, s = memory.shape[:2]
        return self.split_cross(self.cross_kv.rows(memory.reshape(b * s, self.d_model)), b, s)  # (B*S, layers 2d)

    def split_cross(self, kv: Tensor, b: int, s: int) -> tuple[list[Tensor], list[Tensor]]:
        """The projected memory kv (B*S, layers 2d) -> per layer its keys and values, (B, H, S, dh) views."""
        n, h, dh = len(self.layers), self.num_heads, self.head_dim
        kv = kv.view(b, s, n, 2, h, dh).permute(2, 3, 0, 4, 1, 5)  # -> (layers, 2, B, H, S, dh)
        return list(kv[:, 0].unbind(0)), list(kv[:, 1].unbind(0))

    def new_cache(self, memory: Tensor, b: int) -> StepCache:
        ck, cv = self.cross_keys_values(memory)
        keys, values, held = self.buffers.new(len(self.layers), b, self.num_heads, self.head_dim, memory)
        return StepCache(keys, values, 0, ck, cv, held=held)

    def step(self, token: Tensor, cache: StepCache) -> Tensor:
        """One position for every row: token (B,) -> logits (B, V); appends to the cache."""
        t = cache.length
        if t == cache.keys[0].shape[0]:
            self.buffers.grow(cache)
        if cache.rows is not None:  # this step's keys go in rows 0 .. B-1; past the kernel's lengths, no table
            if t < SHORT_MAX_LEN:
                cache.rows[:, t] = torch.arange(cache.rows.shape[0])
            else:
                flatten(self.buffers, cache)
        if cache.lens is None or cache.lens[0] is not cache.mask:
            cache.lens = (cache.mask, kernel_lengths(cache.mask))
        x = F.embedding(token, self.target_table)  # (B, d), already times sqrt(d)
        x = self.positions.add(x[:, None], t)[:, 0]  # + P[t]
        for i in range(len(self.layers)):
            x = self.layer_step(i, x, cache, t)
        cache.length = t + 1
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.output.rows(x)  # (B, V), final_logits_bias included

    def panel_weights(self) -> list:
        """Every layer's ``LayerWeights`` with W in panels, for the native step of more than ``SMALL_ROWS`` rows (a
        beam search's batch: the rows share each panel's loads); made on the first such step ([]: a layer the
        compositions cannot take)."""
        if self._panel_weights is None:
            weights = [native.layer_weights(m, panels=True) for m in self.layers]
            self._panel_weights = weights if all(w is not None for w in weights) else []
        return self._panel_weights

    def layer_step(self, i: int, x: Tensor, cache: StepCache, t: int) -> Tensor:
        """Layer i for one new position of every row: x (B, d) -> (B, d); its keys and values into the cache."""
        b, h, dh, group = x.shape[0], self.num_heads, self.head_dim, cache.group
        keys, values, ck, cv, lens = cache.keys[i], cache.values[i], cache.cross_keys[i], cache.cross_values[i], \
            cache.lens[1]
        rows = cache.rows  # (B, capacity) or None: where each row's keys are (``cache.py``)
        if (self.native_step is not None and lens is not None and t < SHORT_MAX_LEN and ck.shape[2] <= SHORT_MAX_LEN
                and x.is_contiguous()):  # where the program runs the short kernel
            weights = self.step_weights if b <= SMALL_ROWS else self.panel_weights()
            if weights:
                return self.native_step(x, weights[i], keys, values, t, ck, cv, lens, group, rows)

        def attend_self(qkv: Tensor) -> Tensor:  # (B, 3d) -> (B, d): the new key and value, then all of them
            qkv = qkv.view(b, 3, h, dh)
            keys[t, :b].copy_(qkv[:, 1])
            values[t, :b].copy_(qkv[:, 2])
            k, v = keys[: t + 1].permute(1, 2, 0, 3), values[: t + 1].permute(1, 2, 0, 3)  # (B', H, t+1, dh) views
            return self.attend(qkv[:, 0, :, None], k, v, None, self._no_lengths, rows).reshape(b, h * dh)

        def attend_memory(q: Tensor) -> Tensor:  # (B, d): a sentence's beams are the queries of its memory row
            return memory_attention(lambda q4: self.attend(q4, ck, cv, cache.mask, lens), q, b // group, group, h, dh)

        return self.layers[i](x, attend_self, attend_memory)
