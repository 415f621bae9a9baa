"""The non-autoregressive engine: a ``NATModel`` for ``mask_predict``, read from its weight spec. Same protocol,
same outputs to float rounding.

A non-autoregressive pass is one decoder call over every target position at once, so the decoding loop of the
autoregressive engine does not apply; its packed weights do. ``NATEngine(spec, model)`` reuses them (a
``Seq2SeqEngine`` of the same spec: the encoder, the packed layers, the output layer, every layer's
cross-attention K, V projection in one matrix) and runs ``decode_parallel`` as the packed layer program
(``layer.py``) layer after layer: unmasked self-attention over the row (only padding hidden), cross-attention to
keys and values projected once per decoding (kept in the cache that Mask-Predict's iterations pass back), the
feed-forward. At up to ``PASS_ROWS`` positions (B * T) where the short kernel runs, each layer is one native
call (``layer_forward``), or the whole stack (``layers_forward``): 64, so that a CTC row of twice a sentence runs
there too (the layers' products in panels tile any number of rows); past them, a batch of rows of several lengths
runs its products and norms on the rows' own positions only, attention on the padded grid (``packed_rows``).
The length classifier is packed too.

One sentence with one length candidate (latency at batch 1) takes ``first_pass``: the encoder, the best length
(a CTC model: its row of ceil(upsample x S), up to ``PASS_ROWS``, the blank penalty inside), every layer's cross
keys and values, the decoder over a row of mask tokens and each position's best token in one
native call (``NatFirstPass``, ``inference/native/csrc/nat_first_pass.h``: the same entry points in the same
order, bit-identical results), with ``python_first_pass``, the same calls from Python, as its reference and the
path where a part does not run natively.

With ``output_attentions`` the pass runs on the reference model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional.dispatch import SHORT_MAX_LEN
from ..functional.masks import for_heads, keep_positions, padding
from ..functional.tokens import best_tokens
from ..models.nat import ctc_fraction, ctc_row_length, row_lengths_for, source_lengths
from ..models.seq2seq import check_ids, memory_mask_from
from ..nn import LayerCache
from ..nn.transformer import DecoderOutput
from . import native
from .layer import kernel_lengths, memory_attention, self_attention
from .packed import LAYER_ROWS, PackedLinear
from .seq2seq import Seq2SeqEngine
from .spec import ModelSpec

__all__ = ["NATEngine", "packed_rows", "PASS_ROWS"]

PASS_ROWS = 64  # positions (B * T) up to which a decoder pass's layers run natively: a CTC row of 2 x S, S <= 32
MASK_BLOCKS = True  # rows of mask tokens start from the first layer's self-attention block made once per length
PACK_FROM = 1 / 32  # the share of padding in a batch's rows from which the layers run on the rows' positions only


def packed_rows(lengths: Tensor, t: int) -> Tensor | None:
    """Rows of lengths (B,) in a (B, T) grid -> the flat indices (N,) of their positions, N = lengths.sum(), where
    padding is at least ``PACK_FROM`` of the grid (the layers' products then skip it), else None."""
    n = int(lengths.sum())
    if lengths.numel() * t - n < PACK_FROM * lengths.numel() * t:
        return None
    return keep_positions(lengths, t).view(-1).nonzero().view(-1)


class NATEngine:
    """The engine of a NAT model's spec (see the module doc); ``model`` (the reference) is left as it is and
    answers the calls the engine does not run itself (attention weights, a padded batch's lengths), whole."""

    def __init__(self, spec: ModelSpec, model):
        self.reference, self.config = model, spec.config
        self.base = Seq2SeqEngine(spec, model)
        self.length = None if spec.length is None else PackedLinear(spec.length)  # one row: native
        base = self.base
        # a CTC model's row, ceil(S p / q) positions: (p, q); None: the length classifier decides
        self.ctc_row = ctc_fraction(self.config) if self.config.nat_loss == "ctc" else None
        # the longest decoder row the first pass runs natively: a CTC row of PASS_ROWS (where the output layer has
        # its panels: not bfloat16 without AVX512-BF16), else a sentence's
        wide = self.ctc_row is not None and base.output.panels_from() <= LAYER_ROWS
        self.max_first_row = min(PASS_ROWS if wide else LAYER_ROWS, SHORT_MAX_LEN)
        # each layer in one native call where the decoder-layer step runs (the same kernels), W in panels
        weights = [native.layer_weights(m, panels=True) for m in base.layers] if base.step_weights else []
        self.layer_weights = weights if weights and None not in weights else None
        self.stack = native.layer_stack(base.layers, weights) if self.layer_weights else None
        ext = native.compositions()
        self.layer_kernel = ext.layer_forward if self.layer_weights is not None else None
        self.stack_kernel = ext.layers_forward if self.stack is not None else None
        self._mask_table: Tensor | None = None  # (1, n, d) decoder input of n mask tokens (``masked_rows``)
        self._native_first = None  # the first pass in one native call (``first_pass_kernel``), False: none here
        self._mask_blocks: dict[int, Tensor] = {}  # row length -> ``mask_block``

    # -- the mask_predict protocol -------------------------------------------------------------
    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.base.encode(input_ids, attention_mask)

    def length_candidates(self, memory: Tensor, attention_mask: Tensor | None = None, k: int = 1) -> Tensor:
        """``NATModel.length_candidates``; with no mask (no padding) in five operations instead of its fifteen,
        the classifier's product in the packed kernel."""
        if attention_mask is not None or self.length is None:
            return self.reference.length_candidates(memory, attention_mask, k)
        s, cfg = memory.shape[1], self.config
        logits = self.length.rows(memory.sum(1) / max(s, 1))  # (B, 2m + 1) from the mean of the memory
        offsets = logits.topk(min(k, logits.shape[1]), dim=1).indices  # (B, k): T - S + m, best first
        return (offsets + (s - cfg.max_length_offset)).clamp_(1, cfg.max_target_length)

    def row_lengths(self, attention_mask: Tensor | None, memory: Tensor) -> Tensor:
        """``NATModel.row_lengths``: "end", the row to write for each source (``row_lengths_for``) -> (B,)."""
        return row_lengths_for(source_lengths(attention_mask, memory), self.config)

    def output_logits(self, hidden: Tensor) -> Tensor:
        """hidden (..., d) -> logits (..., V) through the packed output layer."""
        return self.base.output(hidden)

    @torch.no_grad()
    def decode_parallel(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
                        lengths: Tensor | None = None, *, cache: list[LayerCache] | None = None,
                        use_cache: bool = False, output_attentions: bool = False) -> DecoderOutput:
        """``NATModel.decode_parallel``: tokens (B, T), memory (B, S, d), lengths (B,) -> hidden (B, T, d); past a
        row's length the states are the model's, or 0 where the layers ran on the rows' positions only
        (``packed_rows``); no caller reads them.

        ``cache``: per layer ``LayerCache(None, (keys, values))`` of the cross-attention, (B, H, S, dh) each,
        as this method returns with ``use_cache``."""
        if output_attentions:
            return self.reference.decode_parallel(tokens, memory, memory_mask, lengths, cache=cache,
                                                  use_cache=use_cache, output_attentions=True)
        base = self.base
        check_ids(tokens, "tokens", self.config.tgt_vocab_size)
        b, t = tokens.shape
        if memory.dim() != 3 or memory.shape[0] != b:
            raise ValueError(f"NATEngine: `memory` must have shape ({b}, S, d), got {tuple(memory.shape)}")
        self_mask, self_lens = None, base._no_lengths
        if lengths is not None:
            if lengths.shape != (b,) or (lengths.numel() and int(lengths.max()) > t):
                raise ValueError(f"NATEngine: `lengths` must be ({b},) values <= {t}, got {tuple(lengths.shape)}")
            if bool((lengths < t).any()):
                self_mask = for_heads(padding(lengths))
                self_lens = kernel_lengths(self_mask)
        if memory_mask is None:
            cross_mask, cross_lens = None, base._no_lengths
        else:
            cross_mask = for_heads(memory_mask_from(memory_mask, memory.shape[1]))
            cross_lens = kernel_lengths(cross_mask)
        if cache is None:
            cache = self.cross_cache(memory)
        masks = (self_mask, self_lens), (cross_mask, cross_lens)
        if not (self.layer_kernel is not None and b * t <= PASS_ROWS and self_lens is not None
                and cross_lens is not None and t <= SHORT_MAX_LEN and memory.shape[1] <= SHORT_MAX_LEN):
            x = self.python_pass(tokens, None if self_mask is None else lengths, cache, *masks)
            return DecoderOutput(x.view(b, t, base.d_model), None, None, cache if use_cache else None)
        x = base.positions.add(F.embedding(tokens, base.target_table), 0)  # (B, T, d), already times sqrt(d)
        # where the program runs the short kernel
        x = self.native_layers(x.contiguous(), self_lens, [c.cross_kv[0] for c in cache],
                               [c.cross_kv[1] for c in cache], cross_lens)
        x = x.reshape(b * t, base.d_model)  # (B, T, d) -> (B*T, d)
        if base.final_norm is not None:
            x = base.final_norm(x)
        return DecoderOutput(x.view(b, t, base.d_model), None, None, cache if use_cache else None)

    def python_pass(self, tokens: Tensor, lengths: Tensor | None, cache: list[LayerCache], self_mask: tuple,
                    cross_mask: tuple) -> Tensor:
        """``decode_parallel`` past the native layers: tokens (B, T), lengths (B,) (None: every row whole) ->
        hidden (B*T, d). Padded rows run their products and norms on their own positions (``packed_rows``); rows of
        mask tokens only (a first pass) start from ``mask_block``, the first layer's self-attention of such rows."""
        base, (b, t) = self.base, tokens.shape
        rows = None if lengths is None else packed_rows(lengths, t)  # (N,) the rows' positions, or None
        first = self.first_block(tokens, lengths, rows)  # (N or B*T, d) or None
        if first is not None:
            x = first
        else:
            x = base.positions.add(F.embedding(tokens, base.target_table), 0).view(b * t, base.d_model)
            x = x if rows is None else x.index_select(0, rows)
        x = self.layers(x, b, t, cache, self_mask, cross_mask, rows, first is not None)
        if base.final_norm is not None:
            x = base.final_norm(x)
        if rows is not None:  # (N, d) -> (B*T, d), 0 past each row's length
            x = x.new_zeros(b * t, base.d_model).index_copy_(0, rows, x)
        return x

    def first_block(self, tokens: Tensor, lengths: Tensor | None, rows: Tensor | None) -> Tensor | None:
        """Rows of mask tokens only (padding aside): the first layer's self-attention block of each row, from
        ``mask_block`` (it depends on the row's length alone) -> (B*T, d), or (N, d) with ``rows``; None for other
        tokens, or padding the layers run with (a few positions, ``rows`` None)."""
        if not MASK_BLOCKS or not self.base.layers or (lengths is not None and rows is None):
            return None
        b, t = tokens.shape
        mask = tokens == self.config.mask_id
        if not bool((mask if lengths is None else mask | ~keep_positions(lengths, t)).all()):
            return None
        if lengths is None:
            return self.mask_block(t).repeat(b, 1)
        return torch.cat([self.mask_block(n) for n in lengths.tolist()])

    def mask_block(self, t: int) -> Tensor:
        """The first decoder layer's self-attention block (the residual included) over a row of t mask tokens:
        (t, d), made once per length (the row's input is the mask embedding plus positions, ``masked_rows``)."""
        got = self._mask_blocks.get(t)
        if got is None or got.dtype != self.base.target_table.dtype:
            base, layer = self.base, self.base.layers[0]
            x = self.masked_rows(t).reshape(t, base.d_model)  # (t, d)
            n1 = layer.norms[0]
            qkv = layer.qkv.rows(n1(x) if layer.norm_first else x)  # (t, 3d)

            def attend(q, k, v):  # a whole row: nothing hidden
                return base.attend(q, k, v, None, base._no_lengths)

            got = layer.residual(layer.self_out, self_attention(attend, qkv, 1, t, base.num_heads, base.head_dim),
                                 x, n1)
            self._mask_blocks[t] = got
        return got

    # -- the layers ----------------------------------------------------------------------------
    def layers(self, x: Tensor, b: int, t: int, cache: list[LayerCache], self_mask: tuple, cross_mask: tuple,
               rows: Tensor | None = None, after_self: bool = False) -> Tensor:
        """The packed layer program, layer after layer (the reference of the native path): x (B*T, d) -> (B*T, d).
        ``self_mask``, ``cross_mask``: (mask for heads, its key lengths for the native kernel or None).

        ``rows`` (N,): x holds only these positions of the (B*T) grid, (N, d) -> (N, d) (``packed_rows``): the
        linear layers and norms run on the rows' own positions, attention on the grid (0 at the padding, which
        the mask hides). ``after_self``: x is the first layer's self-attention block already (``first_block``)."""
        base = self.base
        h, dh = base.num_heads, base.head_dim
        grid = (lambda y: y) if rows is None else (lambda y: y.new_zeros(b * t, y.shape[1]).index_copy_(0, rows, y))
        back = (lambda y: y) if rows is None else (lambda y: y.index_select(0, rows))
        for layer, c in zip(base.layers, cache):
            ck, cv = c.cross_kv

            def attend(q, k, v):  # unmasked: each position sees all of its row (padding hidden)
                return base.attend(q, k, v, *self_mask)

            def attend_memory(q, ck=ck, cv=cv):
                return back(memory_attention(lambda q4: base.attend(q4, ck, cv, *cross_mask), grid(q), b, t, h, dh))

            if after_self and layer is base.layers[0]:
                x = layer.after_self(x, attend_memory)
            else:
                x = layer(x, lambda qkv: back(self_attention(attend, grid(qkv), b, t, h, dh)), attend_memory)
        return x

    def native_layers(self, x: Tensor, self_lens: Tensor, keys: list[Tensor], values: list[Tensor],
                      cross_lens: Tensor) -> Tensor:
        """The decoder's layers natively: x (B, T, d) contiguous, each layer's cross keys and values (B, H, S, dh)
        -> (B, T, d); in one call (``layers_forward``) where the layers share their settings, else one each."""
        if self.stack_kernel is not None:
            return self.stack_kernel(x, self.stack, self_lens, keys, values, cross_lens)
        for w, k, v in zip(self.layer_weights, keys, values):
            x = self.layer_kernel(x, w, self_lens, k, v, cross_lens)
        return x

    def cross_cache(self, memory: Tensor) -> list[LayerCache]:
        """memory (B, S, d) -> per layer LayerCache(None, (keys, values)), each (B, H, S, dh): projected once."""
        keys, values = self.base.cross_keys_values(memory)
        return [LayerCache(None, kv) for kv in zip(keys, values)]

    def masked_rows(self, t: int) -> Tensor:
        """The decoder's input for a row of t mask tokens, (1, t, d): ``decode_parallel``'s embedding and
        positions, made once for the longest row and sliced."""
        base, table = self.base, self._mask_table
        if table is None or table.shape[1] < t or table.dtype != base.target_table.dtype:
            n = max(t, self.config.max_target_length)
            tokens = torch.full((1, n), self.config.mask_id, dtype=torch.long, device=base.target_table.device)
            table = base.positions.add(F.embedding(tokens, base.target_table), 0)  # (1, n, d)
            self._mask_table = table = table.contiguous()
        return table[:, :t]

    # -- the first pass of one sentence ----------------------------------------------------------
    @torch.no_grad()
    def first_pass(self, input_ids: Tensor, suppressed: Tensor, *, use_cache: bool = False,
                   shift: tuple[int, float] | None = None):
        """Mask-Predict's first pass for one unpadded sentence with one length candidate, in one call: the
        encoder, the classifier's best length T (a CTC model: its row, ``ctc_row_length``), the decoder over T mask
        tokens, each position's best token outside ``suppressed`` (``shift`` (id, x): x added to that token's logit
        first, as ``best_of_hidden`` does). The same calls as ``encode``, ``length_candidates``,
        ``decode_parallel`` and ``output_logits``, without the checks and tensors that a batch, a mask or padding
        needs (the decoder's input, mask embedding plus positions, is made once): what latency at batch 1 is made
        of.

        input_ids (1, S) -> (memory (1, S, d), lengths (1, 1), tokens (1, T), log-probabilities (1, T), the
        cross-attention cache with ``use_cache`` else None); None where this does not apply (a batch, a
        model that cuts at END or that the native layers do not run): the caller takes the general path."""
        base = self.base
        s = input_ids.shape[1] if input_ids.dim() == 2 else 0
        if ((self.length is None and self.ctc_row is None) or self.layer_kernel is None
                or not base.encoder.all_native or input_ids.dim() != 2 or input_ids.shape[0] != 1
                or not 0 < s <= min(LAYER_ROWS, SHORT_MAX_LEN)):
            return None
        run = self.first_pass_kernel()
        if run is None or input_ids.dtype != torch.long or not input_ids.is_contiguous():
            return self.python_first_pass(input_ids, suppressed, use_cache, shift)
        # tokens None: T > the layers' rows
        memory, lengths, tokens, logp, kv = run(input_ids, suppressed, *(shift or (-1, 0.0)))
        if not use_cache and tokens is not None:
            return memory, lengths, tokens, logp, None
        keys, values = base.split_cross(kv, 1, s)  # per layer (1, H, S, dh)
        if tokens is None:
            logp, tokens = self.long_row(memory, int(lengths[0, 0]), keys, values, suppressed, shift)
        return memory, lengths, tokens, logp, [LayerCache(None, kv) for kv in zip(keys, values)] if use_cache else None

    def first_pass_kernel(self):
        """``first_pass`` in one native call (``NatFirstPass``: the same kernels in the same order, bit-identical
        results), made on first use; None where not every part runs natively (``python_first_pass`` runs them)."""
        if self._native_first is None:
            from .first_pass import native_first_pass

            self._native_first = native_first_pass(self) or False
        return self._native_first or None

    def python_first_pass(self, input_ids: Tensor, suppressed: Tensor, use_cache: bool,
                          shift: tuple[int, float] | None = None):
        """``first_pass`` from Python: its reference (the same calls, one by one)."""
        base = self.base
        memory = self.encode(input_ids)  # (1, S, d)
        if self.ctc_row is None:
            lengths = self.length_candidates(memory, None, 1)  # (1, 1)
        else:
            lengths = input_ids.new_full((1, 1), ctc_row_length(input_ids.shape[1], self.config))
        t = int(lengths[0, 0])
        keys, values = base.cross_keys_values(memory)  # per layer (1, H, S, dh)
        cache = [LayerCache(None, kv) for kv in zip(keys, values)] if use_cache else None
        if t > self.max_first_row:  # a row longer than the native first pass takes
            logp, tokens = self.long_row(memory, t, keys, values, suppressed, shift)
        else:
            x = self.native_layers(self.masked_rows(t), base._no_lengths, keys, values, base._no_lengths)
            x = x.view(t, base.d_model)  # (1, T, d) -> (T, d)
            norm = base.final_norm
            lim = self.max_first_row  # the native pass's output layer: W in panels up to its longest row
            if norm is not None and norm.affine:  # the decoder's LayerNorm inside the output layer's call
                logits = base.output.norm_rows(x, norm, lim)
            else:
                logits = base.output.rows(x if norm is None else norm(x), lim)
            if shift is not None:
                logits[:, shift[0]] += shift[1]
            logp, tokens = best_tokens(logits, suppressed)  # (T, V) logits -> (T,), (T,)
            logp, tokens = logp.view(1, t), tokens.view(1, t)
        return memory, lengths, tokens, logp, cache

    def long_row(self, memory: Tensor, t: int, keys: list[Tensor], values: list[Tensor], suppressed: Tensor,
                 shift: tuple[int, float] | None = None):
        """A first pass's row longer than the native layers take: (log-probabilities (1, T), tokens (1, T))."""
        tokens = torch.full((1, t), self.config.mask_id, dtype=torch.long, device=memory.device)
        x = self.decode_parallel(tokens, memory, cache=[LayerCache(None, kv) for kv in zip(keys, values)])
        logits = self.base.output.rows(x.last_hidden_state.view(t, self.base.d_model))  # (T, V)
        if shift is not None:
            logits[:, shift[0]] += shift[1]
        logp, tokens = best_tokens(logits, suppressed)
        return logp.view(1, t), tokens.view(1, t)
