"""``VisionConfig``: the image classifier"s settings (``attnkit.models.vision`` builds the model)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from ...nn import TransformerConfig

__all__ = ["VisionConfig"]


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
