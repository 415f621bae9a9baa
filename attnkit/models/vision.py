"""Images as sets of vectors: each pixel a vector, or each patch a vector (ViT), plus a class token.

The lecture's example: a 5 x 10 RGB image is 50 vectors of size 3 (``mode="pixels"``). ViT
(Dosovitskiy et al. 2021) cuts the image into p x p patches and flattens each into p*p*C numbers
(``mode="patches"``). Either way the vectors go through a linear embedding, a learned class token
is put in front, learned positions are added (``Encoder`` with ``positional="learned"``), and the
class token's output is classified.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn

from ..nn import Encoder, TransformerConfig

__all__ = ["VisionConfig", "VisionTransformer", "image_to_vectors"]


def _default_encoder() -> TransformerConfig:
    return TransformerConfig(d_model=64, num_heads=4, d_ff=128, num_encoder_layers=2, dropout=0.1,
                             norm_first=True, activation="gelu", positional="learned", max_len=65)


@dataclass(frozen=True)
class VisionConfig:
    """An image classifier. ``patch_size`` is ignored (1) in ``pixels`` mode."""

    height: int = field(default=8, metadata={"help": "image height in pixels"})
    width: int = field(default=8, metadata={"help": "image width in pixels"})
    channels: int = field(default=1, metadata={"help": "colour channels"})
    num_classes: int = field(default=10, metadata={"help": "number of classes"})
    mode: Literal["pixels", "patches"] = field(default="patches", metadata={
        "help": "pixels: every pixel one vector (the lecture's example); patches: every patch one vector (ViT)"})
    patch_size: int = field(default=2, metadata={"help": "side of a square patch in pixels (patches mode)"})
    encoder: TransformerConfig = field(default_factory=_default_encoder, metadata={
        "help": "the Transformer encoder (positional is learned, max_len the tokens + 1)"})

    def __post_init__(self):
        for name in ("height", "width", "channels", "num_classes", "patch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"VisionConfig: `{name}` must be a positive integer, got {v!r}")
        if self.mode not in ("pixels", "patches"):
            raise ValueError(f"VisionConfig: `mode` must be 'pixels' or 'patches', got {self.mode!r}")
        p = self.patch
        if self.height % p or self.width % p:
            raise ValueError(f"VisionConfig: image {self.height}x{self.width} does not divide into "
                             f"{p}x{p} patches")
        if self.encoder.positional in ("learned",) and self.encoder.max_len < self.num_tokens + 1:
            raise ValueError(f"VisionConfig: encoder max_len {self.encoder.max_len} < {self.num_tokens + 1} "
                             f"tokens (patches + class token)")

    @property
    def patch(self) -> int:
        return 1 if self.mode == "pixels" else self.patch_size

    @property
    def num_tokens(self) -> int:
        return (self.height // self.patch) * (self.width // self.patch)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> VisionConfig:
        d = dict(d)
        d["encoder"] = TransformerConfig.from_dict(d["encoder"])
        return cls(**d)


def image_to_vectors(x: Tensor, patch: int) -> Tensor:
    """(B, C, H, W) -> (B, (H/p)(W/p), p*p*C): one vector per patch (per pixel when p = 1), row-major."""
    b, c, h, w = x.shape
    x = x.reshape(b, c, h // patch, patch, w // patch, patch)  # (B, C, H/p, p, W/p, p)
    x = x.permute(0, 2, 4, 3, 5, 1)  # (B, H/p, W/p, p, p, C)
    return x.reshape(b, (h // patch) * (w // patch), patch * patch * c)


class VisionTransformer(nn.Module):
    """(B, C, H, W) images -> (B, num_classes) logits."""

    def __init__(self, config: VisionConfig, *, device=None, dtype=None):
        super().__init__()
        self.config = config
        d = config.encoder.d_model
        self.embed = nn.Linear(config.patch * config.patch * config.channels, d, device=device, dtype=dtype)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d, device=device, dtype=dtype))
        nn.init.normal_(self.cls_token, std=0.02)
        self.encoder = Encoder(config.encoder, device=device, dtype=dtype)
        self.head = nn.Linear(d, config.num_classes, device=device, dtype=dtype)

    def forward(self, images: Tensor, *, need_weights: bool = False) -> Tensor | tuple[Tensor, tuple[Tensor, ...]]:
        """Returns logits (B, classes), or (logits, attentions: per layer (B, H, 1 + N, 1 + N))."""
        c = self.config
        if images.dim() != 4 or tuple(images.shape[1:]) != (c.channels, c.height, c.width):
            raise ValueError(f"VisionTransformer: `images` must have shape (B, {c.channels}, {c.height}, "
                             f"{c.width}), got {tuple(images.shape)}")
        x = self.embed(image_to_vectors(images, c.patch))  # (B, N, d)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)  # (B, 1 + N, d)
        out = self.encoder(x, need_weights=need_weights)
        logits = self.head(out.last_hidden_state[:, 0])
        return (logits, out.attentions) if need_weights else logits
