"""The encoder engine: a stack of packed layers (``EncoderStack``), and BERT-family encoders on it (``BertEngine``).

``EncoderStack(stack, settings)`` runs a spec ``Stack`` of encoder layers over (B, L, d): each layer the packed
layer program (``layer.py``) with self-attention through ``attnkit.attention`` (any mask, any backend named),
and, at up to ``LAYER_ROWS`` positions (B * L: a sentence or two) under a padding mask (or none) where the
automatic choice would give attention the native ``short`` kernel, the layer in one native call
(``layer_forward``); ``unpadded`` runs unpadded rows through every layer's native call back to back (or the
whole stack in one, ``layers_forward``, where the layers share their settings). The seq2seq and NAT engines'
encoders are ``EncoderStack``s; so is a speech model's (``asr.py``), whose positions are rotary ("rope": q and
k rotated in every layer from tables made once per call; the native calls do not rotate, so such a stack runs
the program).

``BertEngine(spec)`` is a BERT-family model (``models.bert.BertModel``) for inference: the embeddings (word +
position + token type, then LayerNorm) from the spec, then an ``EncoderStack``; the same call and outputs as
the model (``SentenceEncoder`` runs it), no attention weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional import native as kernels
from ..functional.attention import attention
from ..functional.dispatch import SHORT_MAX_LEN
from ..functional.masks import Mask, for_heads
from ..models.bert import BertOutput, key_mask
from . import native
from .layer import kernel_lengths, self_attention, short_kernel
from .packed import LAYER_ROWS, PackedLinear
from .quant_linear import packed_layer
from .spec import ModelSpec, Settings, Stack

__all__ = ["EncoderStack", "BertEngine"]


class EncoderStack:
    """A spec ``Stack`` of encoder layers, packed (see the module doc). (B, L, d) -> (B, L, d)."""

    def __init__(self, stack: Stack, settings: Settings):
        self.settings, self.positions, self.norm = settings, stack.positions, stack.norm
        self.layers = [packed_layer(layer, settings) for layer in stack.layers]  # int8 weights: ``QuantLayer``
        dtype = stack.layers[0].qkv.weight.dtype if stack.layers else torch.float32
        dtype = torch.float32 if dtype == torch.int8 else dtype  # the activations' (int8 weights: float32)
        # each layer in one native call where the short kernel runs for these heads (else None)
        runs = short_kernel(dtype, settings.head_dim) is not None and stack.positions.kind != "rope"
        self.native = [native.layer_weights(m, panels=True) if runs else None for m in self.layers]
        self.stack = native.layer_stack(self.layers, self.native)  # all of them in one call, or None
        ext = native.compositions()
        self.layer_kernel = ext.layer_forward if ext is not None and any(self.native) else None
        self.stack_kernel = ext.layers_forward if self.stack is not None else None
        self.dtype = dtype
        self._no_lengths = kernels.lengths_arg(None)

    @property
    def all_native(self) -> bool:
        """Every layer has its native call (``unpadded`` runs)."""
        return bool(self.layers) and self.layer_kernel is not None and None not in self.native

    def layer(self, i: int, x: Tensor, mask: Mask | None, backend: str | None,
              rotary: tuple[Tensor, Tensor] | None = None) -> Tensor:
        """Layer i over x (B, L, d) with ``mask`` (for heads): its native call where it applies, else the program.
        ``rotary``: the cos, sin tables (L, dh / 2) of a "rope" stack (``Positions.rotary``)."""
        b, l, d = x.shape
        w = self.native[i]
        if (w is not None and self.layer_kernel is not None and backend is None and b * l <= LAYER_ROWS
                and l <= SHORT_MAX_LEN and not torch.is_grad_enabled() and x.dtype == self.dtype
                and x.is_contiguous()):
            lengths = kernel_lengths(mask)  # None: a mask the short kernel does not take
            if lengths is not None and lengths.numel() in (0, b):
                return self.layer_kernel(x, w, lengths, None, None, self._no_lengths)
        h, dh = self.settings.num_heads, self.settings.head_dim

        def attend(q, k, v):  # (B, H, L, dh) each
            return attention(q, k, v, mask, backend=backend)

        out = self.layers[i](x.reshape(b * l, d), lambda qkv: self_attention(attend, qkv, b, l, h, dh, rotary))
        return out.view(b, l, d)

    def forward(self, x: Tensor, mask: Mask | Tensor | None = None, backend: str | None = None) -> Tensor:
        """x (B, L, d) input vectors (embedded, before the positions) -> (B, L, d): positions, layers, final norm."""
        return self.run(self.positions.add(x), mask, backend)

    def run(self, x: Tensor, mask: Mask | Tensor | None = None, backend: str | None = None, *,
            tap: int | None = None) -> Tensor | tuple[Tensor, Tensor]:
        """x (B, L, d), positions added (BERT's embeddings add their own) -> (B, L, d): the layers, the final norm.
        ``tap`` k: (the output of the first k layers, without a norm; the whole stack's), k = 0 .. len(layers)."""
        n = len(self.layers)
        below = self.exit_at(x, mask, backend, n if tap is None else tap)
        x = below if tap is None or tap == n else self.exit_at(below, mask, backend, n, start=tap)
        x = x if self.norm is None else self.norm(x)
        return x if tap is None else (x if tap == n else below, x)

    def exit_at(self, x: Tensor, mask: Mask | Tensor | None, backend: str | None, k: int, *,
                start: int = 0) -> Tensor:
        """x (B, L, d) -> the output of layers start .. k - 1 (B, L, d), without a norm: the rest not run."""
        heads_mask = for_heads(mask)
        rotary = self.positions.rotary(x.shape[1], self.settings.head_dim, x.device)
        for i in range(start, k):
            x = self.layer(i, x, heads_mask, backend, rotary)
        return x

    __call__ = forward

    def unpadded(self, x: Tensor) -> Tensor:
        """x (B, S, d), positions added, no padding, B * S <= LAYER_ROWS, ``all_native`` -> the layers' output
        (B, S, d), before the final norm: one native call for the stack, else one per layer."""
        if self.stack_kernel is not None:
            return self.stack_kernel(x, self.stack, self._no_lengths, [], [], self._no_lengths)
        for w in self.native:
            x = self.layer_kernel(x, w, self._no_lengths, None, None, self._no_lengths)
        return x


class BertEngine:
    """A BERT-family encoder for inference, read from its spec (see the module doc)."""

    def __init__(self, spec: ModelSpec):
        if spec.settings.architecture != "bert":
            raise ValueError(f"BertEngine: needs a BERT-family spec, got {spec.settings.architecture!r}")
        self.spec = spec
        self.encoder = EncoderStack(spec.encoder, spec.settings)
        self.pooler = None if spec.pooler is None else PackedLinear(spec.pooler)

    @property
    def dtype(self) -> torch.dtype:
        return self.spec.source_embedding.dtype

    def embed(self, input_ids: Tensor, token_type_ids: Tensor | None, position_ids: Tensor | None) -> Tensor:
        """``models.bert.BertEmbeddings``' maths: word + position + token type, then LayerNorm. (B, L) -> (B, L, d)."""
        if input_ids.dim() != 2:
            raise ValueError(f"BertEmbeddings: `input_ids` must have shape (B, L), got {tuple(input_ids.shape)}")
        table = self.spec.encoder.positions.table  # (P, d)
        limit = table.shape[0]
        x = F.embedding(input_ids, self.spec.source_embedding)  # (B, L, d)
        if position_ids is None:
            length = input_ids.shape[1]
            if length > limit:
                raise ValueError(f"BertEmbeddings: sequence length {length} exceeds max_position_embeddings {limit}")
            x = x + table[:length]  # (L, d) broadcast over B
        else:
            if position_ids.shape != input_ids.shape:
                raise ValueError(f"BertEmbeddings: `position_ids` must have the shape of `input_ids` "
                                 f"{tuple(input_ids.shape)}, got {tuple(position_ids.shape)}")
            if position_ids.numel() and not 0 <= int(position_ids.min()) <= int(position_ids.max()) < limit:
                raise ValueError(f"BertEmbeddings: `position_ids` must lie in [0, {limit}) (max_position_embeddings)")
            x = x + F.embedding(position_ids, table)  # (B, L, d)
        types = self.spec.token_types
        x = x + types[0] if token_type_ids is None else x + F.embedding(token_type_ids, types)
        return self.spec.embedding_norm(x)

    def __call__(self, input_ids: Tensor, *, lengths: Tensor | None = None, mask: Mask | Tensor | None = None,
                 token_type_ids: Tensor | None = None, position_ids: Tensor | None = None,
                 need_weights: bool = False, output_hidden_states: bool = False, pool: bool = True,
                 backend: str | None = None) -> BertOutput:
        """``BertModel.forward``'s call (see it); no attention weights and no hidden states of every layer."""
        if need_weights or output_hidden_states:
            raise ValueError("BertEngine: cannot return attention weights or every layer's hidden states; use the "
                             "reference model")
        mask = key_mask(input_ids, lengths, mask)
        hidden = self.encoder.run(self.embed(input_ids, token_type_ids, position_ids), mask, backend)
        pooled = torch.tanh(self.pooler(hidden[:, 0])) if pool and self.pooler is not None else None
        return BertOutput(hidden, pooled, None, None)
