"""``GraphAttentionConfig``: the graph attention network"s settings (``attnkit.models.graph`` builds the model)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from ...nn.limits import check_fields, floats

__all__ = ["GraphAttentionConfig", "SCORES", "QK_SOURCES"]


SCORES = ("additive", "dot")
QK_SOURCES = ("input", "projected")


@dataclass(frozen=True)
class GraphAttentionConfig:
    """Sizes and regularisation of a 2-layer GAT. Defaults: the GAT paper's Cora/CiteSeer model."""

    in_features: int = field(metadata={"help": "features per node"})
    num_classes: int = field(metadata={"help": "number of classes"})
    hidden: int = field(default=8, metadata={"help": "hidden units per head of the first layer"})
    heads: int = field(default=8, metadata={"help": "attention heads of the first layer (concatenated)"})
    out_heads: int = field(default=1, metadata={"help": "attention heads of the output layer (averaged)"})
    score: Literal["additive", "dot"] = field(default="additive", metadata={
        "help": "additive: GAT's LeakyReLU(a . [W h_t, W h_s]); dot: scaled q . k over the graph's edges"})
    dropout: float = field(default=0.6, metadata={"help": "dropout on each layer's input features, in [0, 1)"})
    attention_dropout: float = field(default=0.6, metadata={
        "help": "dropout on the attention weights of the edges, in [0, 1)"})
    negative_slope: float = field(default=0.2, metadata={"help": "LeakyReLU slope of the additive score"})
    value_dropout: float = field(default=0.0, metadata={
        "help": "dropout on W x before aggregation, as in the GAT authors' code (0 = none)",
        "range": floats(0, 1, open_high=True)})
    qk_source: Literal["input", "projected"] = field(default="input", metadata={
        "help": "dot score: q, k from the layer input (the lecture's W^q x) or from W x per head"})
    link_loss: float = field(default=0.0, metadata={
        "help": "dot score: weight of SuperGAT's self-supervised edge loss on the attention logits (0 = off)",
        "range": floats(0, 1000)})
    link_negatives: float = field(default=1.0, metadata={"help": "random node pairs per real edge in that loss",
                                                         "range": floats(0, 1000, open_low=True)})

    def __post_init__(self):
        check_fields(self)  # the numbers with a metadata["range"]
        for name in ("in_features", "num_classes", "hidden", "heads", "out_heads"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"GraphAttentionConfig: `{name}` must be a positive integer, got {v!r}")
        if self.score not in SCORES:
            raise ValueError(f"GraphAttentionConfig: `score` must be one of {SCORES}, got {self.score!r}")
        if self.qk_source not in QK_SOURCES:
            raise ValueError(f"GraphAttentionConfig: `qk_source` must be one of {QK_SOURCES}, "
                             f"got {self.qk_source!r}")
        for name in ("dropout", "attention_dropout", "value_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"GraphAttentionConfig: `{name}` must be in [0, 1), got {getattr(self, name)!r}")
        if self.link_loss < 0 or self.link_negatives <= 0:
            raise ValueError(f"GraphAttentionConfig: `link_loss` must be >= 0 and `link_negatives` > 0, got "
                             f"{self.link_loss!r} and {self.link_negatives!r}")
        if self.link_loss > 0 and self.score != "dot":
            raise ValueError("GraphAttentionConfig: `link_loss` needs score='dot' (it trains q_t . k_s)")
        if self.negative_slope < 0:
            raise ValueError(f"GraphAttentionConfig: `negative_slope` must be >= 0, got {self.negative_slope!r}")

    def to_dict(self) -> dict:
        return asdict(self)
