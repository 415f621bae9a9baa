"""Typed, frozen configs, validated on creation. The CLI is built from these.

Each field documents itself in ``metadata["help"]`` (one line: what it does; 0 or None where they are
special) and a number's range in ``metadata["range"]`` (``attnkit.nn.limits``: wide enough for any real
model, checked before anything is allocated); ``attnkit.tasks.options`` turns the fields into options with
that text and range.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Literal

from .limits import check_fields, floats, ints

Activation = Literal["relu", "gelu", "gelu_tanh", "silu"]
Positional = Literal["sinusoidal", "learned", "relative", "rope", "alibi", "none"]
SinusoidalLayout = Literal["interleaved", "halves"]
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
POSITIONALS = ("sinusoidal", "learned", "relative", "rope", "alibi", "none")


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes and choices of an encoder, a decoder or both. Defaults are the paper's "base" model.

    Dropout: ``dropout`` on each sub-layer's output and on the input sums (the paper's P_drop);
    ``attention_dropout`` on the attention weights; ``activation_dropout`` inside the FFN, after the
    activation (tensor2tensor's and torch's extra one; 0 here as in the paper and BERT).

    ``final_norm`` defaults to ``norm_first`` (pre-LN stacks need a last LayerNorm; post-LN ones
    already end in one). ``torch.nn.Transformer`` always adds it, so its parity tests set it.

    ``activation="silu"`` is x * sigmoid(x) (Marian's "swish"). ``sinusoidal_layout``: where the
    table puts sines and cosines (``attnkit.functional.positional.sinusoidal_table``): "interleaved"
    as in the paper and d2l, "halves" (all sines, then all cosines) as in Marian and fairseq.
    """

    d_model: int = field(default=512, metadata={
        "help": "width of every token vector (the model dimension); a multiple of num_heads",
        "range": ints(1, 65536)})
    num_heads: int = field(default=8, metadata={
        "help": "attention heads per layer, each of d_model / num_heads dimensions", "range": ints(1, 1024)})
    d_ff: int = field(default=2048, metadata={"help": "hidden width of each layer's feed-forward network",
                                              "range": ints(1, 2**20)})
    num_encoder_layers: int = field(default=6, metadata={"help": "encoder layers (0 = no encoder)",
                                                         "range": ints(0, 1024)})
    num_decoder_layers: int = field(default=6, metadata={"help": "decoder layers (0 = no decoder)",
                                                         "range": ints(0, 1024)})
    dropout: float = field(default=0.1, metadata={
        "help": "dropout on each sub-layer's output and on the input sums (the paper's P_drop)",
        "range": floats(0, 1, open_high=True)})
    attention_dropout: float = field(default=0.0, metadata={"help": "dropout on the attention weights",
                                                            "range": floats(0, 1, open_high=True)})
    activation_dropout: float = field(default=0.0, metadata={
        "help": "dropout inside the feed-forward network, after the activation", "range": floats(0, 1, open_high=True)})
    activation: Activation = field(default="relu", metadata={"help": "the feed-forward network's activation"})
    norm_first: bool = field(default=False, metadata={
        "help": "pre-LN: LayerNorm before each sub-layer (off: after it, as in the paper)"})
    final_norm: bool | None = field(default=None, metadata={
        "help": "a LayerNorm after the last layer (None: the same as norm_first)"})
    positional: Positional = field(default="sinusoidal", metadata={
        "help": "how positions enter: sinusoidal or learned vectors added to the input, relative (Shaw) "
                "or alibi biases on the scores, rope rotations of q and k, or none"})
    sinusoidal_layout: SinusoidalLayout = field(default="interleaved", metadata={
        "help": "where the sinusoidal table puts sines and cosines: interleaved (the paper, d2l) or halves "
                "(all sines, then all cosines: Marian, fairseq)"})
    max_len: int = field(default=512, metadata={"help": "longest sequence the position tables cover",
                                                "range": ints(1, 2**20)})
    max_relative_distance: int = field(default=16, metadata={
        "help": "relative positions: distances beyond this share one embedding", "range": ints(1, 2**16)})
    layer_norm_eps: float = field(default=1e-5, metadata={"help": "epsilon of every LayerNorm",
                                                          "range": floats(0, 1, open_low=True)})
    bias: bool = field(default=True, metadata={"help": "bias terms in the linear layers and LayerNorms"})

    def __post_init__(self):
        def fail(name, msg):
            raise ValueError(f"TransformerConfig: `{name}` {msg}, got {getattr(self, name)!r}")

        check_fields(self)  # every number in its range (metadata["range"])
        if self.d_model % self.num_heads:
            raise ValueError(f"TransformerConfig: `d_model` ({self.d_model}) must be divisible by "
                             f"`num_heads` ({self.num_heads})")
        if self.activation not in ACTIVATIONS:
            fail("activation", f"must be one of {ACTIVATIONS}")
        if self.positional not in POSITIONALS:
            fail("positional", f"must be one of {POSITIONALS}")
        if self.sinusoidal_layout not in ("interleaved", "halves"):
            fail("sinusoidal_layout", "must be 'interleaved' or 'halves'")
        if self.positional == "rope" and (self.d_model // self.num_heads) % 2:
            fail("positional", "'rope' needs an even head size (d_model / num_heads)")
        if self.positional == "sinusoidal" and self.d_model % 2:
            fail("positional", "'sinusoidal' needs an even d_model")

    @property
    def use_final_norm(self) -> bool:
        """``final_norm``, or ``norm_first`` when it is None."""
        return self.norm_first if self.final_norm is None else self.final_norm

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def replace(self, **changes) -> TransformerConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TransformerConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"TransformerConfig: unknown keys {unknown}")
        return cls(**d)


PRESETS: dict[str, TransformerConfig] = {
    # Vaswani et al. 2017, Table 3 "base": N=6, d_model=512, h=8, d_ff=2048, dropout 0.1.
    "base": TransformerConfig(),
    # Table 3 "big".
    "big": TransformerConfig(d_model=1024, num_heads=16, d_ff=4096, dropout=0.3),
    "small": TransformerConfig(d_model=256, num_heads=4, d_ff=1024, num_encoder_layers=4,
                               num_decoder_layers=4),
    "tiny": TransformerConfig(d_model=64, num_heads=2, d_ff=128, num_encoder_layers=2,
                              num_decoder_layers=2),
}


def preset(name: str, **changes) -> TransformerConfig:
    """A named preset, optionally with fields replaced."""
    if name not in PRESETS:
        raise ValueError(f"preset: unknown name {name!r}; known: {sorted(PRESETS)}")
    return PRESETS[name].replace(**changes) if changes else PRESETS[name]
