"""Inference-only speed-ups for an encoder copy: oneDNN pre-packed linear layers.

``torch.nn.Linear`` on CPU runs float32 through MKL's sgemm, reordering nothing ahead of time;
oneDNN (``torch.ops.mkldnn._linear_pointwise``, the kernel ``torch.compile`` uses for frozen CPU
models) takes weights packed once into its blocked layout, and can apply GELU as a post-op of the
same kernel. ``pack_linears`` swaps every ``nn.Linear`` of a model for a ``PackedLinear`` (and folds
a FeedForward's exact GELU into its first linear layer). ``fuse_encoder_layers`` goes further for
post-LN encoder layers (BERT's): each half ends with attnkit's native residual-addition-and-LayerNorm
kernel (``functional.norm.add_layer_norm``), or, where it cannot run, with the residual added as a
post-op of the output projection (``_linear_pointwise.binary``) and a LayerNorm; so each layer is four
oneDNN kernels, one attention call and two of those. Weights are copied, never trained: use it on an
inference copy only. Where the oneDNN ops are missing it changes nothing.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..functional import native
from ..functional.attention import attention, step_kernel
from ..functional.dispatch import SHORT_MAX_LEN
from ..functional.masks import Mask, for_heads, padding
from ..functional.masks.readers import full_parts
from ..functional.norm import add_layer_norm, add_norm_kernel_runs
from ..nn.blocks import EncoderLayer, FeedForward

__all__ = ["PackedLinear", "FusedEncoderLayer", "pack_linears", "fuse_encoder_layers", "onednn_available",
           "short_kernel", "kernel_lengths"]

SMALL_ROWS = 4  # at most this many rows: attnkit's native small_linear kernel (one sequential pass over W)
LAYER_ROWS = 32  # at most this many rows (B * L, a sentence): W in panels; a whole layer in one native call
_SMALL_ACTS = {"none": 0, "relu": 1, "silu": 2, "gelu": 3, "gelu_tanh": 4}
# attnkit activation -> oneDNN post-op (attr, algorithm) of ``_linear_pointwise``
_POST_OPS = {"none": ("none", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh"), "relu": ("relu", ""),
             "silu": ("swish", "")}


@functools.cache
def onednn_available(dtype: torch.dtype = torch.float32) -> bool:
    """True when torch's oneDNN linear ops exist for ``dtype`` on this CPU and agree with ``F.linear`` on a
    small case (oneDNN packs bfloat16 only where the CPU has AVX512-BW/VL/DQ or AVX-NE-CONVERT)."""
    try:
        ops = torch.ops.mkldnn
        x, w, b = (torch.randn(3, 8, dtype=dtype), torch.randn(4, 8, dtype=dtype), torch.randn(4, dtype=dtype))
        packed, other = ops._reorder_linear_weight(w, None), torch.randn(3, 4, dtype=dtype)
        y = ops._linear_pointwise(x, packed, b, "none", [], "")
        z = ops._linear_pointwise.binary(x, other, packed, b, "add")
        ref = torch.nn.functional.linear(x, w, b)
        tol = 1e-5 if dtype == torch.float32 else 5e-2
        return (bool(torch.backends.mkldnn.is_available()) and torch.allclose(y, ref, atol=tol, rtol=tol)
                and torch.allclose(z, ref + other, atol=tol, rtol=tol))
    except (AttributeError, RuntimeError):
        return False


@functools.cache
def post_op_keeps_nan(activation: str) -> bool:
    """Whether oneDNN's post-op for ``activation`` gives NaN for a NaN input on this CPU, as PyTorch's does
    (on AVX2 its ReLU is max(0, x), which turns NaN into 0; attnkit's NaN policy propagates it)."""
    if activation == "none" or not onednn_available():
        return True
    x = torch.full((1, 8), float("nan"))
    packed = torch.ops.mkldnn._reorder_linear_weight(torch.ones(4, 8), None)
    attr, algorithm = _POST_OPS[activation]
    return bool(torch.ops.mkldnn._linear_pointwise(x, packed, None, attr, [], algorithm).isnan().all())


def _activate(y: Tensor, activation: str) -> Tensor:
    """The activations ``PackedLinear`` runs inside oneDNN, in PyTorch (where oneDNN cannot take the dtype)."""
    if activation == "gelu":
        return F.gelu(y)
    if activation == "gelu_tanh":
        return F.gelu(y, approximate="tanh")
    if activation == "relu":
        return F.relu(y)
    if activation == "silu":
        return F.silu(y)
    return y


class PackedLinear(nn.Module):
    """act(x W^T + b) with W packed for oneDNN. (..., in_features) -> (..., out_features).

    ``activation``: "none", or one of attnkit's activations applied inside the kernel: "gelu" (exact,
    erf), "gelu_tanh", "relu", "silu" (oneDNN's "swish").

    Inputs of at most ``LAYER_ROWS`` rows go to attnkit's native ``small_linear`` where it runs (AVX-512;
    in_features a multiple of 16), with bias, activation and residual in the same pass and a fraction of
    oneDNN's per-call cost (~2 us against ~10 us). W is copied once into the kernel's layout for the rows
    (on the first such call; N rounded up to 16 with zero rows):

    - up to ``SMALL_ROWS`` rows (a decoding step): blocked, 4 rows of W interleaved in chunks of 16, one
      sequential pass; on this 2-core AMD host it streams weights at the bandwidth of a plain sum, about
      1.3x faster than oneDNN's packed layout at one row;
    - up to ``LAYER_ROWS`` (32, a sentence): panels of 16 columns, (N / 16, K, 16), rows of x broadcast against
      them with no horizontal sums; 1.3-2x the blocked kernel at 5 to 16 rows and ahead of oneDNN up to 40
      (1.01-2.4x on this host, warm weights). bfloat16 panels interleave pairs of inputs, (N / 16, K / 2, 16, 2),
      for AVX512-BF16's dot products of pairs, twice float32's rate; they take bfloat16 from 2 rows (at 2 to 4
      rows the blocked kernel's widening of W costs more than the products), and CPUs without AVX512-BF16
      keep bfloat16 blocked.
    """

    def __init__(self, linear: nn.Linear, activation: str = "none"):
        super().__init__()
        if activation not in _POST_OPS:
            raise ValueError(f"PackedLinear: `activation` must be one of {sorted(_POST_OPS)}, got {activation!r}")
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.activation = activation
        self.weight = linear.weight.detach()  # kept for code that reads slices of it (e.g. cross-attention)
        self.bias = None if linear.bias is None else linear.bias.detach()
        # oneDNN's layout in the same dtype, or None where oneDNN cannot take it here (then ``F.linear``)
        self.packed = (torch.ops.mkldnn._reorder_linear_weight(self.weight, None)
                       if onednn_available(self.weight.dtype) else None)
        self.small = _small_kernel(self.weight)  # the native kernel for a few rows, or None
        self._act_id = _SMALL_ACTS[activation]
        # the activation as oneDNN's post-op where it keeps NaN as NaN here, else in PyTorch after the product
        self._in_kernel = post_op_keeps_nan(activation)
        attr, algorithm = _POST_OPS[activation if self._in_kernel else "none"]
        self._post_op = (attr, [], algorithm)
        self._blocked: Tensor | None = None  # W as the small kernel reads it, made on first use
        self._panels: Tensor | None = None
        pad = -self.out_features % 16
        self._small_bias = self.bias if self.bias is None or not pad else F.pad(self.bias, (0, pad))

    def small_weight(self, rows: int) -> Tensor | None:
        """W as the native kernel takes it for this many rows (see the class doc), or None: oneDNN's rows."""
        if self.small is None or rows > LAYER_ROWS:
            return None
        return self.panel_weight() if rows >= self.panels_from() else self._blocked_weight()

    def panels_from(self) -> int:
        """The rows from which ``small_weight`` is W in panels (blocked below): bfloat16 from 2 where
        AVX512-BF16 runs (else never), float32 past ``SMALL_ROWS``."""
        if self.weight.dtype == torch.bfloat16:
            return 2 if _has_bf16() else LAYER_ROWS + 1
        return SMALL_ROWS + 1

    def native_layouts(self) -> list[Tensor]:
        """[W blocked, W in panels, the padded bias or an empty tensor]: what a native call choosing by
        ``panels_from`` takes (``NatFirstPass``)."""
        bias = self._small_bias if self._small_bias is not None else self.weight.new_empty(0)
        return [self._blocked_weight(), self.panel_weight(), bias]

    def add(self, x: Tensor, other: Tensor) -> Tensor:
        """x W^T + b + other in one kernel (no activation). x (N, in), other (N, out) -> (N, out)."""
        if self.activation != "none":
            raise ValueError("PackedLinear.add: only for activation 'none'")
        w = self.small_weight(x.shape[0])
        if w is not None and self.out_features % 16 == 0 and x.is_contiguous() and other.is_contiguous():
            return self.small(x, w, self._small_bias, other, 0)
        if self.packed is None:
            return F.linear(x, self.weight, self.bias) + other
        return torch.ops.mkldnn._linear_pointwise.binary(x, other, self.packed, self.bias, "add")

    def add_norm(self, x: Tensor, other: Tensor, norm_weight: Tensor, norm_bias: Tensor, eps: float) -> Tensor:
        """LayerNorm(other + x W^T + b) * norm_weight + norm_bias (post-LN's residual and norm; no activation).
        x (N, in), other (N, out) -> (N, out). At a few rows one native call, the sum kept in float32."""
        w = self.small_weight(x.shape[0])
        if (w is not None and self.out_features % 16 == 0 and x.is_contiguous() and other.is_contiguous()
                and self.activation == "none"):
            return self.small(x, w, self._small_bias, other, 0, norm_weight, norm_bias, eps)
        return torch.layer_norm(self.add(x, other), (self.out_features,), norm_weight, norm_bias, eps)

    def prepare_small(self) -> PackedLinear:
        """Make the small kernel's copy of W now rather than on the first call of a few rows; returns self."""
        if self.small is not None:
            self._blocked_weight()
        return self

    def _padded_weight(self) -> Tensor:
        """W (N, K) -> (N', K), N' = N rounded up to 16 with zero rows."""
        pad = -self.out_features % 16
        return F.pad(self.weight, (0, 0, 0, pad)) if pad else self.weight

    def _blocked_weight(self) -> Tensor:
        """W -> (N' / 4, K / 16, 4, 16): each 4 rows interleaved in chunks of 16, one stream for the kernel."""
        if self._blocked is None:
            w = self._padded_weight()
            n, k = w.shape
            self._blocked = w.reshape(n // 4, 4, k // 16, 16).permute(0, 2, 1, 3).contiguous()
        return self._blocked

    def panel_weight(self) -> Tensor:
        """W -> W^T in panels of 16 columns (made on first use): float32 (N' / 16, K, 16); bfloat16
        (N' / 16, K / 2, 16, 2), each two inputs interleaved (the pairs vdpbf16ps multiplies)."""
        if self._panels is None:
            w = self._padded_weight()
            n, k = w.shape
            if w.dtype == torch.bfloat16:  # (N', K) -> (N'/16, 16, K/2, 2) -> (N'/16, K/2, 16, 2)
                self._panels = w.reshape(n // 16, 16, k // 2, 2).permute(0, 2, 1, 3).contiguous()
            else:  # (N', K) -> (N'/16, K, 16)
                self._panels = w.reshape(n // 16, 16, k).transpose(1, 2).contiguous()
        return self._panels

    def rows(self, x: Tensor) -> Tensor:
        """act(x W^T + b) for x (N, in) -> (N, out), with no reshaping (the decoders' per-step call)."""
        w = self.small_weight(x.shape[0])
        if w is not None and x.is_contiguous():
            y = self.small(x, w, self._small_bias, None, self._act_id)
            return y if y.shape[1] == self.out_features else y[:, :self.out_features]  # padding rows dropped
        if self.packed is None:
            return _activate(F.linear(x, self.weight, self.bias), self.activation)
        y = torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, *self._post_op)
        return y if self._in_kernel else _activate(y, self.activation)

    def norm_rows(self, x: Tensor, norm_weight: Tensor, norm_bias: Tensor, eps: float) -> Tensor:
        """act(LayerNorm(x) W^T + b) for x (N, in) -> (N, out): pre-LN's norm inside the kernel's widening of x
        at a few rows (one call), else ``torch.layer_norm`` then ``rows``."""
        w = self.small_weight(x.shape[0])
        if w is not None and x.is_contiguous():
            y = self.small(x, w, self._small_bias, None, self._act_id, None, None, eps, norm_weight, norm_bias)
            return y if y.shape[1] == self.out_features else y[:, :self.out_features]
        return self.rows(torch.layer_norm(x, (self.in_features,), norm_weight, norm_bias, eps))

    def forward(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        y = self.rows(x.reshape(-1, self.in_features))  # (..., in) -> (N, in) -> (N, out)
        return y.view(*lead, self.out_features)  # -> (..., out)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, activation={self.activation}"


@functools.cache
def _has_bf16() -> bool:
    """Whether this CPU runs the native kernels' AVX512-BF16 instructions."""
    kernel = native.kernel()
    return kernel is not None and bool(kernel.cpu_has_bf16())


def _small_kernel(weight: Tensor):
    """The native ``small_linear`` function for this weight, or None where it does not run."""
    if weight.device.type != "cpu" or weight.dtype not in (torch.float32, torch.bfloat16) or weight.shape[1] % 16:
        return None
    from ..functional import native

    kernel = native.kernel()
    return None if kernel is None else getattr(kernel, "small_linear", None)


def short_kernel(dtype: torch.dtype, head_dim: int):
    """The "short" backend's raw kernel for heads of ``head_dim`` in ``dtype`` (``attention.step_kernel``,
    checked on example inputs of that kind), or None where that backend does not run."""
    example = torch.zeros(1, 1, 1, head_dim, dtype=dtype)  # (B, H, L, dh)
    try:
        with torch.no_grad():
            return step_kernel("short", example, example, example, for_heads(padding(torch.ones(1, dtype=torch.long))))
    except ValueError:
        return None


def kernel_lengths(mask: Mask | None) -> Tensor | None:
    """A key mask -> the key lengths the native kernel takes (empty: no mask), or None for another kind of mask."""
    parts = full_parts(mask)
    if parts is None or parts[1] is not None:
        return None
    return native.lengths_arg(parts[0])


def native_layer_weights(linears: list[PackedLinear], norms: list[nn.Module],
                         panels: bool = False) -> list[Tensor] | None:
    """The tensors of the native layer kernels (``layer_forward``, ``decoder_layer_step``): the blocked W
    (``panels``: in panels) and b of each linear layer, then each norm's weight and bias; or None where they
    cannot take the layer (a linear without the small kernel, a bias or outputs in multiples of 16; a norm
    that is not an affine LayerNorm, or norms of different eps)."""
    if any(m.small is None or m.bias is None or m.out_features % 16 for m in linears):
        return None
    if (not all(isinstance(n, nn.LayerNorm) and n.weight is not None and n.bias is not None for n in norms)
            or len({n.eps for n in norms}) != 1):
        return None  # (the kernels take one eps)
    lins = [t for m in linears for t in (m.panel_weight() if panels else m._blocked_weight(), m.bias)]
    return lins + [t for n in norms for t in (n.weight, n.bias)]


def _identity(x: Tensor) -> Tensor:
    return x


def pack_linears(model: nn.Module) -> nn.Module:
    """Swap (in place) every ``nn.Linear`` for a ``PackedLinear``; returns ``model``.

    A ``FeedForward``'s activation (GELU, ReLU, SiLU) is fused into ``linear1`` (its own becomes the identity).
    No-op when oneDNN is unavailable.
    """
    if not onednn_available():
        return model
    for module in list(model.modules()):
        if (isinstance(module, FeedForward) and module.activation in _POST_OPS
                and isinstance(module.linear1, nn.Linear)):
            module.linear1 = PackedLinear(module.linear1, module.activation)
            module._act = _identity  # the activation now runs inside linear1's kernel
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, PackedLinear(child))
    return model


class FusedEncoderLayer(nn.Module):
    """Inference form of an ``EncoderLayer``, same maths, fewer kernels. (B, L, d) -> (B, L, d).

    post-LN (BERT's):                           pre-LN:
    x1 = LN(x + W^o attention(x W^{qkv}))       x1 = x + W^o attention(LN(x) W^{qkv})
    x2 = LN(x1 + W2 gelu(x1 W1))                x2 = x1 + W2 gelu(LN(x1) W1)

    The residual runs inside the W^o / W2 kernels (post-LN: with the LN, in one native kernel where it
    runs), the activation inside the W1 kernel.

    Attention goes through ``attnkit.attention`` like everywhere else. Weights are not returned. At up to
    ``LAYER_ROWS`` positions (B * L: a sentence or two) under a padding mask (or none), where the automatic
    choice would give attention the native ``short`` kernel, the whole layer is one native call
    (``layer_forward``: the same small_linear and short kernels, no Python between them); the sequence
    below is its reference and the path for everything else.
    """

    @staticmethod
    def supports(layer: nn.Module) -> bool:
        """An ``EncoderLayer`` with packed self-attention, no positional module in attention, and a
        feed-forward of plain linear layers whose activation oneDNN applies (GELU, ReLU, SiLU)."""
        return (isinstance(layer, EncoderLayer) and layer.self_attn.packed
                and layer.self_attn.position is None and layer.ff.activation in _POST_OPS
                and isinstance(layer.ff.linear1, nn.Linear))

    def __init__(self, layer: EncoderLayer):
        super().__init__()
        if not self.supports(layer):
            raise ValueError("FusedEncoderLayer: needs an EncoderLayer with packed self-attention, no "
                             "positional module in attention, and a GELU, ReLU or SiLU feed-forward")
        mha, ff = layer.self_attn, layer.ff
        self.num_heads, self.head_dim = mha.num_heads, mha.head_dim
        self.in_proj = PackedLinear(mha.in_proj)
        self.out_proj = PackedLinear(mha.out_proj)
        self.linear1 = PackedLinear(ff.linear1, ff.activation)  # the activation runs in the kernel
        self.linear2 = PackedLinear(ff.linear2)
        self.norm1, self.norm2 = layer.attn_block.norm, layer.ff_block.norm
        self.norm_first = layer.attn_block.norm_first
        affine = all(isinstance(n, nn.LayerNorm) and n.weight is not None and n.bias is not None
                     for n in (self.norm1, self.norm2))
        self.native_norm = affine and add_norm_kernel_runs(self.out_proj.weight.dtype, self.out_proj.out_features)
        # the whole layer in one native call where the short kernel runs for these heads (see the class doc)
        kernel = native.kernel() if short_kernel(self.in_proj.weight.dtype, self.head_dim) is not None else None
        layer = getattr(kernel, "layer_forward", None)
        lins = [self.in_proj, self.out_proj, self.linear1, self.linear2]
        self.native_weights = native_layer_weights(lins, [self.norm1, self.norm2], panels=True) if layer else None
        self._native_layer = layer if self.native_weights is not None else None
        self._no_lengths = native.lengths_arg(None)

    def native(self, x: Tensor, lengths: Tensor) -> Tensor:
        """The layer as one native call (``layer_forward``; needs ``_native_layer``): x (B, L, d) contiguous,
        lengths the keys each row sees as ``native.lengths_arg`` gives them -> (B, L, d)."""
        return self._native_layer(x, self.native_weights, self.num_heads, lengths, None, None, self._no_lengths,
                                  self.norm_first, self.linear1._act_id, self.norm1.eps, self.head_dim ** -0.5)

    def _add_norm(self, linear: PackedLinear, x: Tensor, residual: Tensor, norm: nn.LayerNorm) -> Tensor:
        """post-LN: norm(residual + linear(x)); pre-LN: residual + linear(x). x (N, in), residual (N, d) -> (N, d)."""
        if self.norm_first:
            return linear.add(x, residual)
        if self.native_norm:
            return add_layer_norm(linear(x), residual, norm.weight, norm.bias, norm.eps)
        return norm(linear.add(x, residual))

    def forward(self, x: Tensor, mask: Mask | Tensor | None = None, *, need_weights: bool = False,
                backend: str | None = None) -> tuple[Tensor, None]:
        if need_weights:
            raise ValueError("FusedEncoderLayer: cannot return attention weights; use the reference model")
        b, l, d = x.shape
        if (self._native_layer is not None and backend is None and b * l <= LAYER_ROWS and l <= SHORT_MAX_LEN
                and not torch.is_grad_enabled() and x.dtype == self.in_proj.weight.dtype and x.is_contiguous()):
            lengths = kernel_lengths(for_heads(mask))  # None: a mask the short kernel does not take
            if lengths is not None and lengths.numel() in (0, b):
                return self.native(x, lengths), None
        flat = x.reshape(b * l, d)  # (B, L, d) -> (B*L, d)
        pre = self.norm_first
        qkv = self.in_proj(self.norm1(flat) if pre else flat)  # (B*L, 3d)
        qkv = qkv.view(b, l, 3, self.num_heads, self.head_dim)  # -> (B, L, 3, H, dh)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, L, dh)
        o = attention(q, k, v, for_heads(mask), backend=backend)  # (B, H, L, dh)
        o = o.transpose(1, 2).reshape(b * l, d)  # (B, H, L, dh) -> (B*L, d)
        h = self._add_norm(self.out_proj, o, flat, self.norm1)  # (B*L, d)
        f = self.linear1(self.norm2(h) if pre else h)  # (B*L, d_ff), activation applied in the kernel
        out = self._add_norm(self.linear2, f, h, self.norm2)  # (B*L, d)
        return out.view(b, l, d), None


def fuse_encoder_layers(model: nn.Module) -> nn.Module:
    """Swap (in place) every post-LN ``EncoderLayer`` of ``model`` for a ``FusedEncoderLayer``, then pack
    the remaining linear layers (``pack_linears``); returns ``model``. No-op when oneDNN is unavailable."""
    if not onednn_available():
        return model
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if FusedEncoderLayer.supports(child):
                setattr(module, name, FusedEncoderLayer(child))
    return pack_linears(model)
