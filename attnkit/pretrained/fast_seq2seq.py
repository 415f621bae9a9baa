"""An inference copy of a ``Seq2SeqModel`` for decoding: same protocol, same outputs to float rounding, fewer kernels.

``FastSeq2Seq(model)`` answers ``encode`` / ``decode_step`` / ``reorder_cache`` like the model, so
``attnkit.generation.generate`` runs it unchanged. What it does differently (ideas from CTranslate2's
decoder, written here):

- every linear layer is packed once for oneDNN (``PackedLinear``) and for attnkit's ``small_linear``
  kernel, which takes the steps of up to 4 rows (batch 1 greedy: one sequential pass over each weight)
  and, with W in panels, products of up to 32 rows (a beam of 5, a sentence):
  the decoder's fused Q, K, V projection, the feed-forward with its activation inside the first kernel,
  the residual added inside the output projections' kernels, the output layer with ``final_logits_bias``
  as its bias;
- the self-attention keys and values go into preallocated time-major buffers (capacity, B, H, dh),
  written in place at each step (no ``torch.cat`` per step; the capacity doubles when full); attention
  reads the filled part as a strided (B, H, t, dh) view, and moving rows (beams) copies the filled part only;
- the cross-attention keys and values are projected once, on the first step, and kept; when the rows
  become beams (``reorder_cache`` with each row repeated K times) they are not copied K times: the K
  beams of a sentence are K queries against its one set of keys (one attention call of Lq = K);
- one decoding step is one token per row: a longer prefix is fed one token at a time;
- at up to 4 rows each decoder layer of a step is one native call (``decoder_layer_step``: the same
  small_linear and short-attention kernels in one OpenMP region, the K, V cache written in place): the
  Python sequence of ``_layer`` is its reference; a layer's kernels called one by one (15 dispatches, a
  thread team each) took 48 us of a layer step where the region takes 28 (d 256, batch 1, 2 threads).

Attention runs the ``short`` backend's kernel, taken once through ``attnkit.functional.attention.step_kernel``
(``attention``'s checks done on example inputs; the shapes are this module's own), or ``attnkit.attention``
where that backend does not run (other dtypes, head sizes, masks, or more keys than the automatic choice
gives it).
The encoder is a packed copy too (``fuse_encoder_layers``); unpadded sources of up to ``LAYER_ROWS``
positions (a sentence) run its layers' native calls back to back, the module as their reference.
Weights are copied, never trained. With
``output_attentions`` or ``use_cache=False`` the step runs on the reference model.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..functional import native
from ..functional.attention import attention
from ..functional.dispatch import SHORT_MAX_LEN
from ..functional.masks import Mask, for_heads
from ..models.seq2seq import Seq2SeqModel, StepOutput, memory_mask_from
from .fast import (
    LAYER_ROWS,
    SMALL_ROWS,
    FusedEncoderLayer,
    PackedLinear,
    fuse_encoder_layers,
    kernel_lengths,
    native_layer_weights,
    onednn_available,
    short_kernel,
)

__all__ = ["FastSeq2Seq", "StepCache"]


@dataclass
class StepCache:
    """What ``FastSeq2Seq`` keeps between steps. Rows follow the batch (reordered by ``reorder_cache``)."""

    keys: list[Tensor]  # per layer (capacity, B, H, dh), time-major; positions [0, length) are filled
    values: list[Tensor]
    length: int
    cross_keys: list[Tensor]  # per layer (B / group, H, S, dh), projected once
    cross_values: list[Tensor]
    group: int = 1  # consecutive rows (the beams of a sentence) that share one row of cross_keys / values
    mask: Mask | None = None  # the memory mask of the cross-attention rows, for heads
    mask_source: Tensor | None = None  # the memory_mask tensor it came from (group 1)
    spare: list[Tensor] | None = None  # the buffers of the cache this one was reordered from, reused next time
    lens: tuple | None = None  # (mask, its key lengths as the native kernel takes them, or None: not a padding mask)
    held: _Held | None = None  # every K/V buffer this decoding allocated (shared by its caches)


class _Held:
    """The K/V buffers of one decoding, shared by all its caches. When the last of them is gone, the buffers
    become their model's pool, from which the next decoding takes buffers of the same shapes: their pages are
    already mapped (fresh buffers cost a page fault per 4 KB on first write: ~10% of a batch-32 beam-4 run)."""

    def __init__(self, pool: list[Tensor]):
        self.buffers: dict[int, Tensor] = {}  # id -> buffer, the ones its caches still use
        weakref.finalize(self, _recycle, pool, self.buffers)

    def drop(self, buffers: list[Tensor] | None) -> None:
        """Buffers no cache uses any more (outgrown, or of a batch size gone): freed, not pooled."""
        for t in buffers or ():
            self.buffers.pop(id(t), None)


def _recycle(pool: list[Tensor], buffers: dict[int, Tensor]) -> None:
    pool[:] = buffers.values()  # one finished decoding's buffers at most: the memory it used at its end


class _Layer(nn.Module):
    """The packed weights of one ``DecoderLayer``."""

    def __init__(self, layer):
        super().__init__()
        d = layer.self_attn.d_model
        self.qkv = PackedLinear(layer.self_attn.in_proj)  # (3d, d)
        self.self_out = PackedLinear(layer.self_attn.out_proj)
        w, b = layer.cross_attn.in_proj.weight.detach(), layer.cross_attn.in_proj.bias
        self.cross_q = PackedLinear(_linear(w[:d], None if b is None else b[:d]))
        self.cross_kv_weight, self.cross_kv_bias = w[d:], None if b is None else b[d:].detach()  # in .cross_kv
        self.cross_out = PackedLinear(layer.cross_attn.out_proj)
        self.ff1 = PackedLinear(layer.ff.linear1, layer.ff.activation)
        self.ff2 = PackedLinear(layer.ff.linear2)
        self.norms = [_Norm(n) for n in (layer.self_block.norm, layer.cross_block.norm, layer.ff_block.norm)]
        self.step_weights: list[Tensor] | None = None  # set by FastSeq2Seq where the native layer step runs

    def native_weights(self, panels: bool = False) -> list[Tensor] | None:
        """The 18 tensors of ``decoder_layer_step`` (blocked W) and ``layer_forward`` (``panels``): W and b of
        the six linear layers, then the three norms' weight and bias; or None where they cannot take this
        layer (``fast.native_layer_weights``)."""
        lins = [self.qkv, self.self_out, self.cross_q, self.cross_out, self.ff1, self.ff2]
        return native_layer_weights(lins, [n.module for n in self.norms], panels)


class _Norm:
    """A norm module called with the least overhead: ``torch.layer_norm`` directly for an affine LayerNorm."""

    def __init__(self, norm: nn.Module):
        self.module = norm
        affine = isinstance(norm, nn.LayerNorm) and norm.weight is not None and norm.bias is not None
        self.args = (tuple(norm.normalized_shape), norm.weight, norm.bias, norm.eps) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        return self.module(x) if self.args is None else torch.layer_norm(x, *self.args)


def _select_rows(buf: Tensor, index: Tensor, n: int, into: Tensor) -> Tensor:
    """A time-major buffer (capacity, B, H, dh) -> ``into`` (capacity, B', H, dh), a buffer free to overwrite,
    with rows ``index`` of buf's first n steps."""
    new = into
    if n:
        torch.index_select(buf[:n], 1, index, out=new[:n])
    return new


def _linear(weight: Tensor, bias: Tensor | None) -> nn.Linear:
    lin = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        lin.weight.copy_(weight)
        if bias is not None:
            lin.bias.copy_(bias)
    return lin


class FastSeq2Seq(nn.Module):
    """Inference copy of a ``Seq2SeqModel`` (see the module doc); ``model`` itself is left as it is."""

    @staticmethod
    def supports(model) -> bool:
        """A ``Seq2SeqModel`` with packed attention, biases, no in-attention positions, an activation oneDNN
        applies, and oneDNN's linear ops available."""
        if not isinstance(model, Seq2SeqModel) or not onednn_available():
            return False
        tc = model.config.transformer
        layer = model.decoder.layers[0]
        return (tc.bias and tc.positional in ("sinusoidal", "learned", "none") and layer.self_attn.packed
                and layer.cross_attn.packed and tc.activation in ("relu", "gelu", "gelu_tanh", "silu"))

    def __init__(self, model: Seq2SeqModel):
        super().__init__()
        if not self.supports(model):
            raise ValueError("FastSeq2Seq: needs a Seq2SeqModel with biases, packed attention, input positions "
                             "(sinusoidal / learned / none), a ReLU / GELU / SiLU feed-forward, and oneDNN")
        self.reference = model.eval()
        self.config = model.config
        tc = model.config.transformer
        self.num_heads, self.head_dim, self.d_model = tc.num_heads, tc.head_dim, tc.d_model
        self.norm_first = tc.norm_first
        self.short = short_kernel(model.decoder.layers[0].ff.linear1.weight.dtype, tc.head_dim)
        self.scale = tc.head_dim ** -0.5
        self._pool: list[Tensor] = []  # K/V buffers of the last finished decoding, for the next (_Held)
        self._no_lengths = native.lengths_arg(None)
        self.encoder = fuse_encoder_layers(copy.deepcopy(model.encoder)).eval()
        self.src_embed = model.src_embed
        self.embed_scale = model.embed_scale
        self.target_table = (model.target_embedding.weight.detach() * model.embed_scale)  # scaled once
        src = model.src_embed.weight
        self.src_table = self.target_table if src is model.target_embedding.weight else src.detach() * model.embed_scale
        # unpadded rows, at most LAYER_ROWS positions: each encoder layer's native call, back to back
        enc = list(self.encoder.layers)
        native_enc = enc and all(isinstance(m, FusedEncoderLayer) and m._native_layer is not None for m in enc)
        self._native_encoder = enc if native_enc else None
        # ... and all of them in one call (layers_forward: the same kernels) where they share their settings
        same = native_enc and len({(m.num_heads, m.norm_first, m.linear1._act_id, m.norm1.eps) for m in enc}) == 1
        self._encoder_stack = getattr(native.kernel(), "layers_forward", None) if same else None
        self._encoder_weights = [m.native_weights for m in enc] if same else []
        self._source_table: Tensor | None = None  # the positions' rows (``_source_positions``), made on first use
        self._encoder_norm = None if self.encoder.norm is None else _Norm(self.encoder.norm)
        self.position = model.decoder.position
        self.layers = [_Layer(layer) for layer in model.decoder.layers]
        self.final_norm = model.decoder.norm if model.decoder.norm is None else _Norm(model.decoder.norm)
        out_weight = model.target_embedding.weight if model.lm_head is None else model.lm_head.weight
        bias = model.final_logits_bias
        self.output = PackedLinear(_linear(out_weight.detach(), None if bias is None else bias.detach()))
        # every layer's cross-attention K, V projection in one matrix: the memory is projected in one call
        kv_bias = [layer.cross_kv_bias for layer in self.layers]
        self.cross_kv = PackedLinear(_linear(torch.cat([layer.cross_kv_weight for layer in self.layers]),
                                             None if kv_bias[0] is None else torch.cat(kv_bias)))
        for lin in [self.output] + [m for layer in self.layers for m in layer.children()]:
            lin.prepare_small()  # the steps' weights in the small kernel's layout now, not on the first step
        # one native call per layer and step where every layer fits it (else the Python sequence of _layer)
        step = None if self.short is None else getattr(native.kernel(), "decoder_layer_step", None)
        weights = [layer.native_weights() for layer in self.layers] if step is not None else []
        self._native_step = step if weights and all(w is not None for w in weights) else None
        if self._native_step is not None:
            for layer, w in zip(self.layers, weights):
                layer.step_weights = w

    # -- the protocol --------------------------------------------------------------------------
    @torch.no_grad()
    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """input_ids (B, S), attention_mask (B, S) 1 = real token -> memory (B, S, d)."""
        self.reference._check_ids(input_ids, "input_ids", self.config.src_vocab_size)
        b, s = input_ids.shape
        if (self._native_encoder is not None and 0 < b * s <= LAYER_ROWS and s <= SHORT_MAX_LEN
                and (attention_mask is None or (attention_mask.shape == input_ids.shape
                                                and bool(attention_mask.all())))):
            return self._encode_unpadded(input_ids)
        x = self.src_embed(input_ids) * self.embed_scale  # (B, S, d)
        return self.encoder(x, memory_mask_from(attention_mask, s)).last_hidden_state

    def _source_positions(self, s: int, dtype: torch.dtype) -> Tensor | None:
        """What the encoder's input positions add to S rows, (S, d) in ``dtype``: the module run once over
        zeros of its longest input and sliced (a module call per sentence costs more than the sum), or None
        past that length."""
        table = self._source_table
        if table is None or table.dtype != dtype:
            n = max(self.config.max_positions, 1)
            zeros = torch.zeros(1, n, self.d_model, dtype=dtype, device=self.src_table.device)
            self._source_table = table = self.encoder.position(zeros)[0].contiguous()  # (n, d): 0 + P[i] = P[i]
        return table[:s] if s <= table.shape[0] else None

    def _encode_unpadded(self, input_ids: Tensor) -> Tensor:
        """input_ids (B, S) with no padding, B * S <= LAYER_ROWS -> memory (B, S, d): the embedding, the
        layers in one native call (``layers_forward``; else each layer's, ``layer_forward``) and the final norm
        (a sentence's latency). The encoder module, which ``encode`` runs otherwise, is its reference."""
        x = F.embedding(input_ids, self.src_table)  # (B, S, d), already times sqrt(d)
        if self.encoder.position is not None:
            rows = self._source_positions(input_ids.shape[1], x.dtype)
            x = self.encoder.position(x) if rows is None else x + rows  # + P[:S]
        if self._encoder_stack is not None:  # every layer in one call
            m = self._native_encoder[0]
            x = self._encoder_stack(x, self._encoder_weights, m.num_heads, self._no_lengths, [], [], self._no_lengths,
                                    m.norm_first, m.linear1._act_id, m.norm1.eps, m.head_dim ** -0.5)
        else:
            for layer in self._native_encoder:
                x = layer.native(x, self._no_lengths)
        return x if self._encoder_norm is None else self._encoder_norm(x)

    @torch.no_grad()
    def decode_step(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
                    cache: StepCache | None = None, *, use_cache: bool = True,
                    output_attentions: bool = False) -> StepOutput:
        """tokens (B, t) -> logits (B, V) of the last position and the updated ``StepCache``."""
        if output_attentions or not use_cache or isinstance(cache, list):
            return self.reference.decode_step(tokens, memory, memory_mask, cache, use_cache=use_cache,
                                              output_attentions=output_attentions)
        self.reference._check_ids(tokens, "tokens", self.config.tgt_vocab_size)
        if cache is None:
            cache = self._new_cache(memory, tokens.shape[0])
        if cache.group == 1 and cache.mask_source is not memory_mask:
            cache.mask_source, cache.mask = memory_mask, for_heads(memory_mask_from(memory_mask, memory.shape[1]))
        logits = None
        for j in range(tokens.shape[1]):
            logits = self._one(tokens[:, j], cache)
        return StepOutput(logits, cache, None)

    def reorder_cache(self, cache: StepCache, index: Tensor, *, cross: bool = True) -> StepCache:
        """Row i of the new cache is row ``index[i]`` of the old (beam search moves, finished rows leave).

        ``cache`` is spent: its buffers are overwritten by the next call (they are reused, not reallocated).
        When every cache of a decoding is gone, its buffers go to this model's pool and the next decoding
        writes into them: copy what you keep of a cache's tensors.
        """
        if isinstance(cache, list):
            return self.reference.reorder_cache(cache, index, cross=cross)
        n, layers = cache.length, len(cache.keys)
        old = cache.keys + cache.values
        shape = (old[0].shape[0], index.numel(), *old[0].shape[2:])
        held = cache.held if cache.held is not None else _Held(self._pool)
        if cache.spare and cache.spare[0].shape == shape:
            spare = cache.spare
        else:
            held.drop(cache.spare)
            spare = [self._take(held, shape, b) for b in old]
        new = [_select_rows(b, index, n, into) for b, into in zip(old, spare)]
        # the old buffers become the spare set of the next move (no fresh allocation per beam-search step):
        # a cache must not be used after it was passed here
        out = StepCache(new[:layers], new[layers:], n, cache.cross_keys, cache.cross_values, cache.group, cache.mask,
                        cache.mask_source, spare=old, held=held)
        if not cross:  # rows stay within their sentence: the cross-attention rows stay as they are
            return out
        g, rows = cache.group, cache.cross_keys[0].shape[0] * cache.group
        k = index.numel() // rows
        if g == 1 and k > 1 and index.numel() == k * rows and torch.equal(
                index, torch.arange(rows, device=index.device).repeat_interleave(k)):
            out.group = k  # each row became k beams: they share its cross-attention row
            return out
        if g > 1 and index.numel() % g == 0:
            first = index.view(-1, g)[:, 0]
            if bool((first % g == 0).all()) and torch.equal(index.view(-1, g),
                                                            first[:, None] + torch.arange(g, device=index.device)):
                sel = first // g  # whole sentences leave or stay: select their cross-attention rows
                out.cross_keys = [c.index_select(0, sel) for c in cache.cross_keys]
                out.cross_values = [c.index_select(0, sel) for c in cache.cross_values]
                if cache.mask_source is not None:
                    out.mask_source = cache.mask_source.index_select(0, sel)
                    out.mask = for_heads(memory_mask_from(out.mask_source, out.mask_source.shape[1]))
                return out
        cross_index = index // g  # any other move: one cross-attention row per row again
        out.cross_keys = [c.index_select(0, cross_index) for c in cache.cross_keys]
        out.cross_values = [c.index_select(0, cross_index) for c in cache.cross_values]
        out.group, out.mask, out.mask_source = 1, None, None  # the mask is read again from memory_mask
        return out

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

    def _new_cache(self, memory: Tensor, b: int, capacity: int = 32) -> StepCache:
        h, dh = self.num_heads, self.head_dim
        ck, cv = self.cross_keys_values(memory)
        held = _Held(self._pool)
        keys = [self._take(held, (capacity, b, h, dh), memory) for _ in self.layers]
        values = [self._take(held, (capacity, b, h, dh), memory) for _ in self.layers]
        return StepCache(keys, values, 0, ck, cv, held=held)

    def _take(self, held: _Held, shape: tuple, like: Tensor) -> Tensor:
        """An uninitialised buffer of ``shape`` (like's dtype and device): from the pool when it has one, else new."""
        shape = torch.Size(shape)
        buf = None
        pool = self._pool
        for t in list(pool):  # a copy: a decoding that ends meanwhile replaces the pool
            if t.shape == shape and t.dtype == like.dtype and t.device == like.device:
                at = next((j for j, u in enumerate(pool) if u is t), None)  # by identity: == is elementwise
                if at is None:
                    continue
                del pool[at]
                buf = t
                break
        if buf is None:
            buf = like.new_empty(shape)
        held.buffers[id(buf)] = buf
        return buf

    def _grow(self, cache: StepCache) -> None:
        cap = cache.keys[0].shape[0]
        if cache.held is None:
            cache.held = _Held(self._pool)
        for buffers in (cache.keys, cache.values):
            for i, t in enumerate(buffers):
                new = self._take(cache.held, (2 * cap, *t.shape[1:]), t)
                new[:cap] = t
                buffers[i] = new
                cache.held.drop([t])

    def _one(self, token: Tensor, cache: StepCache) -> Tensor:
        """One position for every row: token (B,) -> logits (B, V); appends to the cache."""
        b, h, dh = token.shape[0], self.num_heads, self.head_dim
        t = cache.length
        if t == cache.keys[0].shape[0]:
            self._grow(cache)
        if cache.lens is None or cache.lens[0] is not cache.mask:
            cache.lens = (cache.mask, kernel_lengths(cache.mask))
        x = F.embedding(token, self.target_table)  # (B, d), already times sqrt(d)
        if self.position is not None:
            x = self.position(x[:, None], t)[:, 0]  # + P[t]
        for i, layer in enumerate(self.layers):
            x = self._layer(layer, x, cache.keys[i], cache.values[i], cache.cross_keys[i], cache.cross_values[i],
                            cache.mask, cache.lens[1], cache.group, t, b, h, dh)
        cache.length = t + 1
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.output.rows(x)  # (B, V), final_logits_bias included

    def _layer(self, layer: _Layer, x: Tensor, keys: Tensor, values: Tensor, ck: Tensor, cv: Tensor,
               mask: Mask | None, lens: Tensor | None, group: int, t: int, b: int, h: int, dh: int) -> Tensor:
        """x (B, d) -> (B, d): masked self-attention over the cache, cross-attention, feed-forward.

        ``lens``: the memory mask's key lengths for the native kernel (None: its kind needs ``attention``)."""
        if (self._native_step is not None and b <= SMALL_ROWS and lens is not None and t < SHORT_MAX_LEN
                and ck.shape[2] <= SHORT_MAX_LEN and x.is_contiguous()):  # where _attend runs the short kernel
            return self._native_step(x, layer.step_weights, keys, values, t, ck, cv, lens, group, self.norm_first,
                                     layer.ff1._act_id, layer.norms[0].args[3], self.scale)
        n1, n2, n3 = layer.norms
        pre = self.norm_first
        qkv = layer.qkv.rows(n1(x) if pre else x).view(b, 3, h, dh)  # (B, 3d) -> (B, 3, H, dh)
        keys[t].copy_(qkv[:, 1])
        values[t].copy_(qkv[:, 2])
        k, v = keys[: t + 1].permute(1, 2, 0, 3), values[: t + 1].permute(1, 2, 0, 3)  # (B, H, t+1, dh) views
        o = self._attend(qkv[:, 0, :, None], k, v, None, self._no_lengths)  # (B, H, 1, dh)
        x = self._residual(layer.self_out, o.reshape(b, h * dh), x, n1)
        q = layer.cross_q.rows(n2(x) if pre else x)  # (B, d)
        q = q.view(b // group, group, h, dh).transpose(1, 2)  # -> (B / g, H, g, dh): a sentence's beams
        o = self._attend(q, ck, cv, mask, lens)  # (B / g, H, g, dh)
        x = self._residual(layer.cross_out, o.transpose(1, 2).reshape(b, h * dh), x, n2)
        f = layer.ff1.rows(n3(x) if pre else x)  # (B, d_ff), activation inside the kernel
        return self._residual(layer.ff2, f, x, n3)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, lens: Tensor | None) -> Tensor:
        """Attention of q (N, H, Lq, dh) over k, v (N, H, Lk, dh): the "short" backend's kernel where the automatic
        choice would run it (``step_kernel``: the shapes are this module's own, so ``attention``'s checks ran once),
        else ``attnkit.attention``. The kernel writes (N, Lq, H, dh) memory, so merging the heads is free."""
        if self.short is not None and lens is not None and k.shape[2] <= SHORT_MAX_LEN:
            return self.short(q, k, v, lens, self._no_lengths, self.scale)
        return attention(q, k, v, mask)

    def _residual(self, linear: PackedLinear, y: Tensor, x: Tensor, norm: _Norm) -> Tensor:
        """Post-LN: norm(x + linear(y)); pre-LN: x + linear(y). The sum happens inside the linear kernel, and
        with an affine LayerNorm at a few rows the norm too."""
        if self.norm_first:
            return linear.add(y, x)
        if norm.args is not None:
            return linear.add_norm(y, x, *norm.args[1:])
        return norm(linear.add(y, x))
