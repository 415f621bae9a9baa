"""``AsrConfig``: the speech recogniser's settings (``attnkit.models.asr`` builds the model), and the decoder's
special tokens it names."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

from ...nn import TransformerConfig
from ...nn.limits import check_fields, floats, ints

__all__ = ["AsrConfig", "PAD", "BOS", "EOS", "SUBSAMPLES", "STREAMING_WINDOW"]

PAD, BOS, EOS = 0, 1, 2
SUBSAMPLES = (4, 8)  # frames per encoder step: two or three convolutions of stride 2
STREAMING_WINDOW = (16, 0)  # a streaming model's window unless one is given: no right context


WIDTH = dict(d_model=96, num_heads=4, d_ff=384, dropout=0.1, activation="gelu", norm_first=True)  # both stacks'


def _encoder() -> TransformerConfig:
    return TransformerConfig(**WIDTH, num_encoder_layers=6, num_decoder_layers=0, positional="rope", max_len=1 << 16)


def _decoder() -> TransformerConfig:
    return TransformerConfig(**WIDTH, num_encoder_layers=0, num_decoder_layers=2, positional="sinusoidal", max_len=256)


@dataclass(frozen=True)
class AsrConfig:
    """The model's sizes and kinds; the encoder's and the decoder's stacks are two ``TransformerConfig``s."""

    n_mels: int = field(default=40, metadata={"help": "log-mel bins per frame", "range": ints(1, 512)})
    window: tuple[int, int] | None = field(default=(8, 8), metadata={
        "help": "truncated self-attention in the encoder: (left, right) encoder steps (80 ms each at subsample 8) "
                "each step sees, or None (full) for every step"})
    streaming: bool = field(default=False, metadata={
        "help": "causal convolutions and a window without right context: the encoder runs on chunks as they come"})
    kernel: int = field(default=5, metadata={"help": "width in time of the front end's convolutions",
                                             "range": ints(1, 31)})
    subsample: int = field(default=8, metadata={
        "help": "frames (10 ms) per encoder step: 4 (two convolutions of stride 2) or 8 (three)",
        "range": ints(4, 8), "choices": SUBSAMPLES})
    ctc_layer: int = field(default=-1, metadata={
        "help": "the encoder layer (from 1) whose output the CTC head reads, the CTC one pass running only that "
                "many layers; 0: the last; -1: the middle one, ceil(layers / 2)", "range": ints(-1, 1024)})
    frontend: str = field(default="conv2d", metadata={
        "help": "the front end's convolutions: over time and frequency (conv2d, ESPnet's; on a voice never heard "
                "2.7 points fewer digit errors, docs/asr.md), or over time with every mel bin a channel (conv1d)",
        "choices": ("conv1d", "conv2d")})
    channels: int = field(default=32, metadata={"help": "conv2d front end: feature maps of its convolutions",
                                                "range": ints(1, 1024)})
    ctc_weight: float = field(default=0.3, metadata={
        "help": "training loss = (1 - w) attention cross-entropy + w CTC (0 = no CTC head training, 1 = only CTC)",
        "range": floats(0, 1)})
    adversary_speakers: int = field(default=0, metadata={
        "help": "speaker-adversarial training: a head that tells this many training speakers apart from what the "
                "CTC head reads, its gradient reversed into the encoder (0: none; train asr sets it)",
        "range": ints(0, 100_000)})
    max_positions: int = field(default=256, metadata={"help": "most tokens the decoder writes (END included)",
                                                      "range": ints(2, 256)})
    encoder: TransformerConfig = field(default_factory=_encoder, metadata={"help": "the encoder's stack"})
    decoder: TransformerConfig = field(default_factory=_decoder, metadata={"help": "the decoder's stack"})

    # what attnkit.generation reads
    pad_token_id = PAD
    bos_token_id = BOS
    eos_token_id = EOS
    decoder_start_token_id = None

    def __post_init__(self):
        for name in ("encoder", "decoder"):
            if isinstance(getattr(self, name), dict):
                object.__setattr__(self, name, TransformerConfig.from_dict(getattr(self, name)))
            if not isinstance(getattr(self, name), TransformerConfig):
                raise ValueError(f"AsrConfig: `{name}` must be a TransformerConfig, got {getattr(self, name)!r}")
        check_fields(self)
        if self.window is not None:
            w = tuple(self.window)
            if len(w) != 2 or any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in w):
                raise ValueError(f"AsrConfig: `window` must be (left, right) integers >= 0 or None, "
                                 f"got {self.window!r}")
            object.__setattr__(self, "window", w)
        if self.streaming and (self.window is None or self.window[1] != 0):
            raise ValueError(f"AsrConfig: `streaming` needs a window with no right context, (left, 0), "
                             f"got {self.window!r}")
        if self.frontend not in ("conv1d", "conv2d"):
            raise ValueError(f"AsrConfig: `frontend` must be 'conv1d' or 'conv2d', got {self.frontend!r}")
        if self.encoder.num_encoder_layers < 1 or self.decoder.num_decoder_layers < 1:
            raise ValueError("AsrConfig: needs at least one encoder and one decoder layer, got "
                             f"{self.encoder.num_encoder_layers} and {self.decoder.num_decoder_layers}")
        if self.subsample not in SUBSAMPLES:
            raise ValueError(f"AsrConfig: `subsample` must be one of {SUBSAMPLES}, got {self.subsample!r}")
        if self.ctc_layer > self.encoder.num_encoder_layers:
            raise ValueError(f"AsrConfig: `ctc_layer` must be at most the encoder's {self.encoder.num_encoder_layers}"
                             f" layers (0: the last, -1: the middle one), got {self.ctc_layer}")
        if self.encoder.d_model != self.decoder.d_model:
            raise ValueError(f"AsrConfig: the encoder's d_model ({self.encoder.d_model}) and the decoder's "
                             f"({self.decoder.d_model}) must be equal")
        if self.encoder.positional in ("sinusoidal", "learned", "relative") and self.streaming:
            raise ValueError("AsrConfig: `streaming` needs encoder positions that only see distances "
                             f"(rope, alibi or none), got {self.encoder.positional!r}")

    def replace(self, **changes) -> AsrConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["window"] = list(self.window) if self.window is not None else None
        return d

    @property
    def ctc_layers(self) -> int:
        """Encoder layers below the CTC head."""
        n = self.encoder.num_encoder_layers
        return {0: n, -1: (n + 1) // 2}.get(self.ctc_layer, self.ctc_layer)

    @classmethod
    def from_dict(cls, d: dict) -> AsrConfig:
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"AsrConfig: unknown keys {unknown}")
        # runs saved before these fields: their front end and CTC head (conv1d was the default until 2026-11-29)
        d = {"subsample": 4, "ctc_layer": 0, "frontend": "conv1d", **d}
        if d.get("window") is not None:
            d["window"] = tuple(d["window"])
        return cls(**d)
