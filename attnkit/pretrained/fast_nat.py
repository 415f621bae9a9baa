"""An inference copy of a ``NATModel`` for ``mask_predict``: same protocol, same outputs to float rounding.

A non-autoregressive pass is one decoder call over every target position at once, so the decoding
loop of ``FastSeq2Seq`` does not apply; its packed weights do. ``FastNAT(model)`` reuses them
(``FastSeq2Seq``'s packed encoder, fused Q, K, V projection, feed-forward with the activation inside the
kernel, residual inside the output projections' kernels, packed output layer) and runs
``decode_parallel`` as a flat loop over the layers: unmasked self-attention over the row (only
padding hidden), cross-attention to keys and values projected once per decoding (kept in the cache
that Mask-Predict's iterations pass back), the feed-forward. Attention is ``FastSeq2Seq``'s: the
"short" backend's kernel (``attention.step_kernel``) where the automatic choice would run it, else
``attnkit.attention``. At up to ``LAYER_ROWS`` positions (B * T) where that kernel runs, each layer is
one native call (``layer_forward``: the same kernels, no Python between them); the loop is its
reference and the path for more rows. The length classifier is the model's own (one small matrix product).

One sentence with one length candidate (latency at batch 1) takes ``first_pass``: the encoder, the best
length, every layer's cross keys and values, the decoder over a row of mask tokens and each position's
best token in one native call (``NatFirstPass``, ``functional/native/csrc/nat_first_pass.h``: the same
entry points in the same order, bit-identical results), with ``_first_pass``, the same calls from
Python, as its reference and the path where a part does not run natively.

With ``output_attentions`` the pass runs on the reference model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..functional import native
from ..functional.dispatch import SHORT_MAX_LEN
from ..functional.masks import for_heads, padding
from ..functional.tokens import best_tokens
from ..models.nat import NATModel
from ..models.seq2seq import memory_mask_from
from ..nn import LayerCache
from ..nn.transformer import DecoderOutput
from .fast import LAYER_ROWS, PackedLinear, kernel_lengths
from .fast_seq2seq import FastSeq2Seq

__all__ = ["FastNAT"]


class FastNAT(nn.Module):
    """Inference copy of a ``NATModel`` (see the module doc); ``model`` itself is left as it is."""

    @staticmethod
    def supports(model) -> bool:
        """A ``NATModel`` that ``FastSeq2Seq`` supports (biases, packed attention, input positions, oneDNN)."""
        return isinstance(model, NATModel) and FastSeq2Seq.supports(model)

    def __init__(self, model: NATModel):
        super().__init__()
        if not self.supports(model):
            raise ValueError("FastNAT: needs a NATModel that FastSeq2Seq supports (biases, packed attention, "
                             "sinusoidal / learned / no input positions, a ReLU / GELU / SiLU feed-forward, oneDNN)")
        self.reference = model.eval()
        self.config = model.config
        self.base = FastSeq2Seq(model)
        self._length = None if model.length_head is None else PackedLinear(model.length_head)  # one row: native
        # each layer in one native call where the decoder-layer step runs (the same kernels), W in panels
        layer = getattr(native.kernel(), "layer_forward", None) if self.base._native_step is not None else None
        self.layer_weights = [lay.native_weights(panels=True) for lay in self.base.layers] if layer else []
        self._native_layer = layer if self.layer_weights and None not in self.layer_weights else None
        # every layer in one call (layers_forward: the same kernels) where they share activation and eps
        same = len({(lay.ff1._act_id, lay.norms[0].args[3]) for lay in self.base.layers}) == 1
        self._native_stack = getattr(native.kernel(), "layers_forward", None) if self._native_layer and same else None
        self._mask_table: Tensor | None = None  # (1, n, d) decoder input of n mask tokens (``_masked_rows``)
        self._native_first = None  # the first pass in one native call (``first_pass_kernel``), False: none here

    # -- the mask_predict protocol -------------------------------------------------------------
    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.base.encode(input_ids, attention_mask)

    def length_candidates(self, memory: Tensor, attention_mask: Tensor | None = None, k: int = 1) -> Tensor:
        """``NATModel.length_candidates``; with no mask (no padding) in five operations instead of its fifteen,
        the classifier's product in the packed kernel."""
        if attention_mask is not None or self._length is None:
            return self.reference.length_candidates(memory, attention_mask, k)
        s, cfg = memory.shape[1], self.config
        logits = self._length.rows(memory.sum(1) / max(s, 1))  # (B, 2m + 1) from the mean of the memory
        offsets = logits.topk(min(k, logits.shape[1]), dim=1).indices  # (B, k): T - S + m, best first
        return (offsets + (s - cfg.max_length_offset)).clamp_(1, cfg.max_target_length)

    def row_lengths(self, attention_mask: Tensor | None, memory: Tensor) -> Tensor:
        return self.reference.row_lengths(attention_mask, memory)

    def output_logits(self, hidden: Tensor) -> Tensor:
        """hidden (..., d) -> logits (..., V) through the packed output layer."""
        return self.base.output(hidden)

    @torch.no_grad()
    def decode_parallel(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
                        lengths: Tensor | None = None, *, cache: list[LayerCache] | None = None,
                        use_cache: bool = False, output_attentions: bool = False) -> DecoderOutput:
        """``NATModel.decode_parallel``: tokens (B, T), memory (B, S, d), lengths (B,) -> hidden (B, T, d).

        ``cache``: per layer ``LayerCache(None, (keys, values))`` of the cross-attention, (B, H, S, dh) each,
        as this method returns with ``use_cache``."""
        if output_attentions:
            return self.reference.decode_parallel(tokens, memory, memory_mask, lengths, cache=cache,
                                                  use_cache=use_cache, output_attentions=True)
        ref, base = self.reference, self.base
        ref._check_ids(tokens, "tokens", self.config.tgt_vocab_size)
        b, t = tokens.shape
        d = base.d_model
        if memory.dim() != 3 or memory.shape[0] != b:
            raise ValueError(f"FastNAT: `memory` must have shape ({b}, S, d), got {tuple(memory.shape)}")
        self_mask, self_lens = None, base._no_lengths
        if lengths is not None:
            if lengths.shape != (b,) or (lengths.numel() and int(lengths.max()) > t):
                raise ValueError(f"FastNAT: `lengths` must be ({b},) values <= {t}, got {tuple(lengths.shape)}")
            if bool((lengths < t).any()):
                self_mask = for_heads(padding(lengths))
                self_lens = kernel_lengths(self_mask)
        if memory_mask is None:
            cross_mask, cross_lens = None, base._no_lengths
        else:
            cross_mask = for_heads(memory_mask_from(memory_mask, memory.shape[1]))
            cross_lens = kernel_lengths(cross_mask)
        if cache is None:
            cache = self._cross_cache(memory)
        x = F.embedding(tokens, base.target_table)  # (B, T, d), already times sqrt(d)
        if base.position is not None:
            x = base.position(x, 0)
        if (self._native_layer is not None and b * t <= LAYER_ROWS and self_lens is not None and cross_lens is not None
                and t <= SHORT_MAX_LEN and memory.shape[1] <= SHORT_MAX_LEN and x.is_contiguous()):
            x = self._native_layers(x, self_lens, [c.cross_kv[0] for c in cache], [c.cross_kv[1] for c in cache],
                                    cross_lens)  # where _attend runs the short kernel
            x = x.reshape(b * t, d)  # (B, T, d) -> (B*T, d)
        else:
            x = self._layers(x.reshape(b * t, d), b, t, cache, self_mask, self_lens, cross_mask, cross_lens)
        if base.final_norm is not None:
            x = base.final_norm(x)
        return DecoderOutput(x.view(b, t, d), None, None, cache if use_cache else None)

    @torch.no_grad()
    def first_pass(self, input_ids: Tensor, suppressed: Tensor, *, use_cache: bool = False):
        """Mask-Predict's first pass for one unpadded sentence with one length candidate, in one call: the
        encoder, the classifier's best length T, the decoder over T mask tokens, each position's best token
        outside ``suppressed``. The same calls as ``encode``, ``length_candidates``, ``decode_parallel`` and
        ``output_logits``, without the checks and tensors that a batch, a mask or padding needs (the
        decoder's input, mask embedding plus positions, is made once): what latency at batch 1 is made of.

        input_ids (1, S) -> (memory (1, S, d), lengths (1, 1), tokens (1, T), log-probabilities (1, T), the
        cross-attention cache with ``use_cache`` else None); None where this does not apply (a batch, a
        model that cuts at END or that the native layers do not run): the caller takes the general path."""
        base = self.base
        s = input_ids.shape[1] if input_ids.dim() == 2 else 0
        if (self._length is None or self._native_layer is None or base._native_encoder is None
                or input_ids.dim() != 2 or input_ids.shape[0] != 1 or not 0 < s <= min(LAYER_ROWS, SHORT_MAX_LEN)):
            return None
        run = self.first_pass_kernel()
        if run is None or input_ids.dtype != torch.long or not input_ids.is_contiguous():
            return self._first_pass(input_ids, suppressed, use_cache)
        memory, lengths, tokens, logp, kv = run(input_ids, suppressed)  # tokens None: T > the layers' rows
        if not use_cache and tokens is not None:
            return memory, lengths, tokens, logp, None
        keys, values = base.split_cross(kv, 1, s)  # per layer (1, H, S, dh)
        if tokens is None:
            logp, tokens = self._long_row(memory, int(lengths[0, 0]), keys, values, suppressed)
        return memory, lengths, tokens, logp, [LayerCache(None, kv) for kv in zip(keys, values)] if use_cache else None

    def first_pass_kernel(self):
        """``first_pass`` in one native call (``NatFirstPass``: the same kernels in the same order, bit-identical
        results), made on first use; None where not every part runs natively (``_first_pass`` runs them)."""
        if self._native_first is None:
            self._native_first = self._make_first_pass() or False
        return self._native_first or None

    def _make_first_pass(self):
        base, kernel = self.base, native.kernel()
        make = getattr(kernel, "NatFirstPass", None)
        if make is None or self._native_stack is None or base._encoder_stack is None or self._length is None:
            return None
        enc, lay = base._native_encoder[0], base.layers[0]
        norms = [n for n in (base._encoder_norm, base.final_norm)  # the final norms that are not nn.Identity
                 if n is not None and not isinstance(n.module, nn.Identity)]
        if ((enc.num_heads, enc.norm_first, enc.linear1._act_id, enc.norm1.eps, enc.head_dim ** -0.5)
                != (base.num_heads, base.norm_first, lay.ff1._act_id, lay.norms[0].args[3], base.scale)
                or any(n.args is None for n in norms) or len({n.args[3] for n in norms}) > 1
                or any(lin.small is None for lin in (self._length, base.cross_kv, base.output))):
            return None
        dtype, cfg = base.target_table.dtype, self.config
        rows = min(LAYER_ROWS, SHORT_MAX_LEN)  # the longest source and row the pass takes
        positions = base._source_positions(cfg.max_positions, dtype) if base.encoder.position is not None else None
        if base.encoder.position is not None and (positions is None or positions.shape[0] < rows):
            return None  # fewer positions than a row of the native layers: the Python pass
        linears = (self._length, base.cross_kv, base.output)
        def weights(norm) -> list[Tensor]:  # [weight, bias] of a LayerNorm, [] for none
            return list(norm.args[1:3]) if norm in norms else []

        return make(base.src_table.contiguous(), base.target_table.new_empty(0) if positions is None else positions,
                    base._encoder_weights, weights(base._encoder_norm), self.layer_weights, weights(base.final_norm),
                    norms[0].args[3] if norms else 1e-5, base.num_heads, base.norm_first, lay.ff1._act_id,
                    lay.norms[0].args[3], base.scale, self._length.native_layouts(), cfg.max_length_offset,
                    base.cross_kv.native_layouts(), base.output.native_layouts(),
                    [n for lin in linears for n in (lin.panels_from(), lin.out_features)],
                    self._masked_rows(cfg.max_target_length).contiguous(), rows)

    def _first_pass(self, input_ids: Tensor, suppressed: Tensor, use_cache: bool):
        """``first_pass`` from Python: its reference (the same calls, one by one)."""
        base = self.base
        memory = self.encode(input_ids)  # (1, S, d)
        lengths = self.length_candidates(memory, None, 1)  # (1, 1)
        t = int(lengths[0, 0])
        keys, values = base.cross_keys_values(memory)  # per layer (1, H, S, dh)
        cache = [LayerCache(None, kv) for kv in zip(keys, values)] if use_cache else None
        if t > LAYER_ROWS or t > SHORT_MAX_LEN:  # a row longer than the native layers take
            logp, tokens = self._long_row(memory, t, keys, values, suppressed)
        else:
            x = self._native_layers(self._masked_rows(t), base._no_lengths, keys, values, base._no_lengths)
            x = x.view(t, base.d_model)  # (1, T, d) -> (T, d)
            norm = base.final_norm
            if norm is not None and norm.args is not None:  # the decoder's LayerNorm inside the output layer's call
                logits = base.output.norm_rows(x, norm.args[1], norm.args[2], norm.args[3])
            else:
                logits = base.output.rows(x if norm is None else norm(x))
            logp, tokens = best_tokens(logits, suppressed)  # (T, V) logits -> (T,), (T,)
            logp, tokens = logp.view(1, t), tokens.view(1, t)
        return memory, lengths, tokens, logp, cache

    def _long_row(self, memory: Tensor, t: int, keys: list[Tensor], values: list[Tensor], suppressed: Tensor):
        """A first pass's row longer than the native layers take: (log-probabilities (1, T), tokens (1, T))."""
        tokens = torch.full((1, t), self.config.mask_id, dtype=torch.long, device=memory.device)
        x = self.decode_parallel(tokens, memory, cache=[LayerCache(None, kv) for kv in zip(keys, values)])
        logp, tokens = best_tokens(self.base.output.rows(x.last_hidden_state.view(t, self.base.d_model)), suppressed)
        return logp.view(1, t), tokens.view(1, t)

    def _native_layers(self, x: Tensor, self_lens: Tensor, keys: list[Tensor], values: list[Tensor],
                       cross_lens: Tensor) -> Tensor:
        """The decoder's layers natively: x (B, T, d) contiguous, each layer's cross keys and values (B, H, S, dh)
        -> (B, T, d); in one call (``layers_forward``) where the layers share their settings, else one each."""
        base = self.base
        lay = base.layers[0]
        if self._native_stack is not None:
            return self._native_stack(x, self.layer_weights, base.num_heads, self_lens, keys, values, cross_lens,
                                      base.norm_first, lay.ff1._act_id, lay.norms[0].args[3], base.scale)
        for layer, w, k, v in zip(base.layers, self.layer_weights, keys, values):
            x = self._native_layer(x, w, base.num_heads, self_lens, k, v, cross_lens, base.norm_first,
                                   layer.ff1._act_id, layer.norms[0].args[3], base.scale)
        return x

    def _masked_rows(self, t: int) -> Tensor:
        """The decoder's input for a row of t mask tokens, (1, t, d): ``decode_parallel``'s embedding and
        positions, made once for the longest row and sliced."""
        table = self._mask_table
        if table is None or table.shape[1] < t or table.dtype != self.base.target_table.dtype:
            n = max(t, self.config.max_target_length)
            tokens = torch.full((1, n), self.config.mask_id, dtype=torch.long, device=self.base.target_table.device)
            table = F.embedding(tokens, self.base.target_table)  # (1, n, d), already times sqrt(d)
            if self.base.position is not None:
                table = self.base.position(table, 0)
            self._mask_table = table = table.contiguous()
        return table[:, :t]

    def _layers(self, x: Tensor, b: int, t: int, cache: list[LayerCache], self_mask, self_lens, cross_mask,
                cross_lens) -> Tensor:
        """The layers as a Python sequence (the reference of the native path): x (B*T, d) -> (B*T, d)."""
        base = self.base
        d, h, dh = base.d_model, base.num_heads, base.head_dim
        pre = base.norm_first
        for layer, c in zip(base.layers, cache):
            n1, n2, n3 = layer.norms
            qkv = layer.qkv.rows(n1(x) if pre else x).view(b, t, 3, h, dh)  # (B*T, 3d) -> (B, T, 3, H, dh)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, dh)
            o = base._attend(q, k, v, self_mask, self_lens)  # unmasked: each position sees all (padding hidden)
            x = base._residual(layer.self_out, o.transpose(1, 2).reshape(b * t, d), x, n1)  # (B*T, d)
            q = layer.cross_q.rows(n2(x) if pre else x).view(b, t, h, dh).transpose(1, 2)  # -> (B, H, T, dh)
            o = base._attend(q, c.cross_kv[0], c.cross_kv[1], cross_mask, cross_lens)  # (B, H, T, dh)
            x = base._residual(layer.cross_out, o.transpose(1, 2).reshape(b * t, d), x, n2)
            x = base._residual(layer.ff2, layer.ff1.rows(n3(x) if pre else x), x, n3)  # activation in ff1
        return x

    def _cross_cache(self, memory: Tensor) -> list[LayerCache]:
        """memory (B, S, d) -> per layer LayerCache(None, (keys, values)), each (B, H, S, dh): projected once."""
        keys, values = self.base.cross_keys_values(memory)
        return [LayerCache(None, kv) for kv in zip(keys, values)]
