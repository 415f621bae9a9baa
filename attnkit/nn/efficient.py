"""Efficient attention modules with the call of ``MultiHeadAttention`` (same projections, heads, output).

Exact (the result equals softmax attention under the module's pattern):

- ``StructuredAttention``: a fixed sparsity pattern (an attnkit mask) ``&``-combined with the caller's
  mask and run on a named backend: local windows, Longformer's window + global tokens, the Sparse
  Transformer's strided pattern (backend "sparse"), or any other registered backend.

APPROXIMATE (labelled so, never picked automatically; each refuses masks it cannot honour):

- ``LinformerAttention`` (Wang et al. 2020): keys and values projected along the length by learned
  (max_len, k) matrices E, F shared by the heads: softmax(q (E^T K)^T) (F^T V). O(L * k).
- ``NystromAttention`` (Xiong et al. 2021): ``attnkit.functional.nystrom`` with m landmarks. O(L * m).
- ``PerformerAttention`` (Choromanski et al. 2021): FAVOR+ positive orthogonal random features,
  ``attnkit.functional.performer``; the projection is a buffer, redrawn by ``redraw()`` or every
  ``redraw_every`` training calls. O(L * m * d).

None of them returns weights or keeps a K/V cache. Padding masks are honoured by all: hidden
positions are zeroed before any sum, so they never reach an output.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..functional import attention
from ..functional.masks import Mask
from ..functional.nystrom import nystrom_attention
from ..functional.performer import favor_attention, linear_masks, orthogonal_gaussian
from .attention import AttentionOutput, KVCache, MultiHeadAttention

__all__ = ["StructuredAttention", "LinformerAttention", "NystromAttention", "PerformerAttention"]


class StructuredAttention(MultiHeadAttention):
    """``MultiHeadAttention`` whose every call also applies ``pattern`` (a mask, or None) and runs on
    ``default_backend`` unless the call names another (``backend="math"`` gives the reference)."""

    def __init__(self, d_model: int, num_heads: int, *, pattern: Mask | None = None,
                 default_backend: str | None = None, **kwargs):
        super().__init__(d_model, num_heads, **kwargs)
        self.pattern, self.default_backend = pattern, default_backend

    def attend(self, q, k, v, mask, bias, need_weights, backend):
        both = self.pattern if mask is None else mask if self.pattern is None else self.pattern & mask
        return super().attend(q, k, v, both, bias, need_weights, backend or self.default_backend)


class _Approximate(MultiHeadAttention):
    """Shared checks: self-attention shapes only, no weights, cache, bias, dropout or named backend."""

    def __init__(self, d_model: int, num_heads: int, **kwargs):
        name = type(self).__name__
        for key in ("position", "kdim", "vdim"):
            if kwargs.get(key) is not None:
                raise ValueError(f"{name}: `{key}` is not supported (an approximate self-attention)")
        if kwargs.get("dropout", 0.0):
            raise ValueError(f"{name}: attention `dropout` is not supported (no attention weights exist)")
        super().__init__(d_model, num_heads, **kwargs)

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                mask: Mask | Tensor | None = None, *, need_weights: bool = False, cache: KVCache | None = None,
                use_cache: bool = False, backend: str | None = None) -> AttentionOutput:
        name = type(self).__name__
        if need_weights:
            raise ValueError(f"{name} is approximate and has no attention weights; use MultiHeadAttention")
        if cache is not None or use_cache:
            raise ValueError(f"{name} keeps no K/V cache (no incremental decoding)")
        if backend is not None:
            raise ValueError(f"{name} computes its own attention; `backend` must be None, got {backend!r}")
        return super().forward(query, key, value, mask)

    def attend(self, q, k, v, mask, bias, need_weights, backend):
        return self.approximate(q, k, v, mask), None

    def approximate(self, q: Tensor, k: Tensor, v: Tensor, mask: Mask | None) -> Tensor:
        """q (B, H, Lq, dh), k, v (B, H, Lk, dh) -> (B, H, Lq, dh)."""
        raise NotImplementedError


class LinformerAttention(_Approximate):
    """APPROXIMATE. ``max_len``: the longest sequence (E, F have that many rows; shorter inputs use
    the first L); ``k``: the projected length. ``share_kv``: one matrix for keys and values.
    Causal masks raise (the projection mixes every position into every projected key)."""

    def __init__(self, d_model: int, num_heads: int, *, max_len: int, k: int = 256, share_kv: bool = False,
                 device=None, dtype=None, **kwargs):
        super().__init__(d_model, num_heads, device=device, dtype=dtype, **kwargs)
        if max_len < 1 or k < 1:
            raise ValueError(f"LinformerAttention: `max_len` and `k` must be >= 1, got {max_len}, {k}")
        self.max_len, self.k = max_len, k
        self.e = nn.Parameter(torch.randn(max_len, k, device=device, dtype=dtype) * max_len ** -0.5)
        self.f = self.e if share_kv else nn.Parameter(torch.randn(max_len, k, device=device, dtype=dtype)
                                                     * max_len ** -0.5)

    def approximate(self, q, k, v, mask):
        causal, keep = linear_masks(mask, q, k, "LinformerAttention")
        if causal:
            raise ValueError("LinformerAttention cannot honour a causal mask: its projection mixes future "
                             "positions into every projected key; use PerformerAttention or an exact variant")
        length = k.shape[-2]
        if length > self.max_len:
            raise ValueError(f"LinformerAttention: sequence length {length} exceeds max_len={self.max_len}")
        if keep is not None:  # hidden positions take no part in the projected keys and values
            k, v = torch.where(keep, k, 0.0), torch.where(keep, v, 0.0)
        e, f = self.e[:length].to(k.dtype), self.f[:length].to(v.dtype)  # (L, k)
        kp = torch.einsum("lk,bhld->bhkd", e, k)  # E^T K: (B, H, k, dh)
        vp = torch.einsum("lk,bhld->bhkd", f, v)  # F^T V: (B, H, k, dh)
        return attention(q, kp, vp)  # softmax over the k projected keys: (B, H, Lq, dh)


class NystromAttention(_Approximate):
    """APPROXIMATE. ``num_landmarks`` m; ``pinv_iterations`` Newton-Schulz steps (None: exact pinv)."""

    def __init__(self, d_model: int, num_heads: int, *, num_landmarks: int = 64, pinv_iterations: int | None = 6,
                 **kwargs):
        super().__init__(d_model, num_heads, **kwargs)
        if num_landmarks < 1:
            raise ValueError(f"NystromAttention: `num_landmarks` must be >= 1, got {num_landmarks}")
        self.num_landmarks, self.pinv_iterations = num_landmarks, pinv_iterations

    def approximate(self, q, k, v, mask):
        return nystrom_attention(q, k, v, self.num_landmarks, mask, pinv_iterations=self.pinv_iterations)


class PerformerAttention(_Approximate):
    """APPROXIMATE. ``num_features`` m random features per head (one (m, dh) projection shared by the
    heads, a buffer saved with the weights); ``redraw_every`` > 0 redraws it every that many training
    calls (from torch's global generator, so seeded runs repeat), 0 only when ``redraw()`` is called."""

    def __init__(self, d_model: int, num_heads: int, *, num_features: int = 64, redraw_every: int = 0,
                 device=None, dtype=None, **kwargs):
        super().__init__(d_model, num_heads, device=device, dtype=dtype, **kwargs)
        if num_features < 1 or redraw_every < 0:
            raise ValueError(f"PerformerAttention: `num_features` must be >= 1 and `redraw_every` >= 0, got "
                             f"{num_features}, {redraw_every}")
        self.num_features, self.redraw_every = num_features, redraw_every
        self.register_buffer("projection", orthogonal_gaussian(num_features, self.head_dim, device=device,
                                                               dtype=torch.float32))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long, device=device))

    @torch.no_grad()
    def redraw(self) -> None:
        """Draw a new random projection (m, dh)."""
        self.projection.copy_(orthogonal_gaussian(self.num_features, self.head_dim, device=self.projection.device))

    def approximate(self, q, k, v, mask):
        if self.training and self.redraw_every:
            if int(self.calls) % self.redraw_every == 0 and int(self.calls) > 0:
                self.redraw()
            self.calls += 1
        return favor_attention(q, k, v, self.projection, mask)
