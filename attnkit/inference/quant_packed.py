"""A spec int8 ``Linear`` packed once for attnkit's own int8 kernel (``int8_linear``: ``functional/native/csrc/
int8_linear.h``), which ``QuantLinear`` runs where it is built.

The kernel takes W in one of two layouts, both made here when the engine is made (never on a call): blocked, each
4 rows interleaved in chunks of 64 inputs (a decoding step's few rows: one sequential pass over W), and panels of
16 outputs x 4 inputs (more rows: no horizontal sums); K is padded to a multiple of 64 and N to 16 with zeros. With
them go W^T (the outlier channels' rows), the per-output scales, the bias and 128 times each row's sum of W (the
offset AVX512-VNNI's u8 x s8 products carry). The rows are quantised to ``quant.NATIVE_ACT_MAX`` (8 bits): the
kernel's products cannot saturate (``csrc/vec_int8.h``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..functional import native
from .quant import NATIVE_ACT_MAX, outliers
from .spec import Linear

__all__ = ["Int8Packed", "int8_kernel", "BLOCKED_ROWS"]

BLOCKED_ROWS = 4  # at most this many rows: W blocked (dot products of rows); more: W in panels


def int8_kernel():
    """The native ``int8_linear`` of the variant that runs here, or None (no native build)."""
    kernel = native.kernel()
    return None if kernel is None else getattr(kernel, "int8_linear", None)


class Int8Packed:
    """An int8 spec ``Linear`` (weight (N, K) int8, ``scale`` (N,)) in the native kernel's layouts: ``weight(rows)``
    is the ``Int8Weight`` for that many rows, ``fields(panels)`` its tensors and settings (the compositions make
    their own ``Int8Weight`` of them)."""

    def __init__(self, linear: Linear, act_max: int = NATIVE_ACT_MAX):
        q = linear.weight
        n, k = q.shape
        pad_n, pad_k = -n % 16, -k % 64
        w = F.pad(q, (0, pad_k, 0, pad_n))  # (N', kp), zeros in the padding
        rows, kp = w.shape
        self.blocked_w = w.reshape(rows // 4, 4, kp // 64, 64).permute(0, 2, 1, 3).contiguous()  # (N'/4, kp/64, 4, 64)
        self.panels_w = w.reshape(rows // 16, 16, kp // 4, 4).permute(0, 2, 1, 3).contiguous()  # (N'/16, kp/4, 16, 4)
        bias = torch.zeros(0) if linear.bias is None else F.pad(linear.bias.float(), (0, pad_n))
        self._fields = dict(wt=F.pad(q, (0, 0, 0, pad_n)).T.contiguous(),  # (K, N')
                            scale=F.pad(linear.scale.float(), (0, pad_n)).contiguous(),
                            wsum=(128 * w.sum(1, dtype=torch.int32)).contiguous(), bias=bias.contiguous(),
                            outputs=n, outliers=outliers(k), act_max=float(act_max))
        kernel = native.kernel()
        self.blocked = kernel.Int8Weight(self.blocked_w, **self._fields)
        self.panels = kernel.Int8Weight(self.panels_w, **self._fields)

    def weight(self, rows: int):
        """The ``Int8Weight`` for a call of this many rows: blocked up to ``BLOCKED_ROWS``, else in panels."""
        return self.blocked if rows <= BLOCKED_ROWS else self.panels

    def fields(self, panels: bool) -> dict:
        """``Int8Weight``'s arguments, W blocked or in panels."""
        return dict(w=self.panels_w if panels else self.blocked_w, **self._fields)

    @property
    def bias(self) -> Tensor:
        return self._fields["bias"]
