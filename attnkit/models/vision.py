"""Images as sets of vectors: each pixel a vector, or each patch a vector (ViT), plus a class token.

The lecture's example: a 5 x 10 RGB image is 50 vectors of size 3 (``mode="pixels"``). ViT
(Dosovitskiy et al. 2021) cuts the image into p x p patches and flattens each into p*p*C numbers
(``mode="patches"``). Either way the vectors go through a linear embedding, a learned class token
is put in front, learned positions are added (``Encoder`` with ``positional="learned"``), and the
class token's output is classified.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..nn import Encoder
from .configs.vision import VisionConfig

__all__ = ["VisionConfig", "VisionTransformer", "image_to_vectors"]


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
