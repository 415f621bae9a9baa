"""``SpeechConfig``: the spoken-word classifier"s settings (``attnkit.models.speech`` builds the model)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...nn import TransformerConfig
from ...nn.limits import check_fields, ints

__all__ = ["SpeechConfig"]


def _default_encoder() -> TransformerConfig:
    return TransformerConfig(d_model=96, num_heads=4, d_ff=192, num_encoder_layers=4, num_decoder_layers=0,
                             dropout=0.1, activation="gelu", norm_first=True, positional="sinusoidal",
                             max_len=4096)


@dataclass(frozen=True)
class SpeechConfig:
    """``window``: (left, right) frames each query sees after subsampling, or None for full attention.
    ``subsample``: stride of the convolutional front end (2 halves the frames the encoder sees)."""

    n_mels: int = field(default=40, metadata={"help": "log-mel bins per frame"})
    num_classes: int = field(default=10, metadata={"help": "number of classes"})
    window: tuple[int, int] | None = field(default=(4, 4), metadata={
        "help": "truncated self-attention: (left, right) frames each frame sees after subsampling, or None (full) "
                "for every frame"})
    subsample: int = field(default=1, metadata={
        "help": "stride of the convolutional front end (2 halves the frames the encoder sees)",
        "range": ints(1, 64)})
    encoder: TransformerConfig = field(default_factory=_default_encoder, metadata={"help": "the Transformer encoder"})

    def __post_init__(self):
        check_fields(self)  # the numbers with a metadata["range"]
        for name in ("n_mels", "num_classes", "subsample"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"SpeechConfig: `{name}` must be a positive integer, got {v!r}")
        if self.window is not None:
            w = tuple(self.window)
            if len(w) != 2 or any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in w):
                raise ValueError(f"SpeechConfig: `window` must be (left, right) integers >= 0 or None, "
                                 f"got {self.window!r}")
            object.__setattr__(self, "window", w)
        if isinstance(self.encoder, dict):
            object.__setattr__(self, "encoder", TransformerConfig.from_dict(self.encoder))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["window"] = list(self.window) if self.window is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SpeechConfig:
        d = dict(d)
        if d.get("window") is not None:
            d["window"] = tuple(d["window"])
        return cls(**d)
