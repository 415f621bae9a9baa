"""``NATConfig``: the non-autoregressive translation model's settings (``attnkit.models.nat`` builds the model)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ...nn.limits import check_fields, floats
from .seq2seq import Seq2SeqConfig

__all__ = ["NATConfig", "NAT_LOSSES", "LENGTH_STRATEGIES"]

LengthStrategy = Literal["classifier", "end"]
LENGTH_STRATEGIES = ("classifier", "end")
NATLoss = Literal["mask-predict", "glat", "ctc"]
NAT_LOSSES = ("mask-predict", "glat", "ctc")


@dataclass(frozen=True)
class NATConfig(Seq2SeqConfig):
    """A ``Seq2SeqConfig`` plus how the NAT decides the output length (see the module doc).

    ``length``: "classifier" or "end". ``max_length_offset`` (m): the classifier's classes are
    T - S = -m .. m (clamped). ``row_ratio``, ``row_extra``: the row length for "end".
    ``mask_token_id``: the decoder's input at positions to predict (None: the start token).
    ``length_loss_weight``: weight of the length classifier's loss in training.
    ``nat_loss``, ``glat_ratio``, ``ctc_upsample``: how the model is trained (see their help; a run saved
    before they existed reads as "mask-predict").
    """

    length: LengthStrategy = "classifier"
    max_length_offset: int = 32
    row_ratio: float = 1.5
    row_extra: int = 8
    mask_token_id: int | None = None
    length_loss_weight: float = 0.1
    nat_loss: NATLoss = field(default="mask-predict", metadata={"help": (
        "nat: how the parallel decoder is trained: mask-predict (default; a random number of target tokens "
        "masked, predicted from the others), glat (glancing training: a first pass, then reference tokens "
        "revealed in proportion to its errors, one-pass decoding), ctc (an upsampled row of mask tokens, CTC "
        "loss, the length from the alignment, no length classifier)")})
    glat_ratio: float = field(default=0.5, metadata={"help": (
        "nat, --nat-loss glat: reference tokens revealed per position the first pass got wrong (default 0.5; "
        "0: none revealed, plain one-pass training)"), "range": floats(0, 1)})
    ctc_upsample: float = field(default=2, metadata={"help": (
        "nat, --nat-loss ctc: the decoder writes this many positions per source token, rounded up (default 2; "
        "1.5: 3 positions per 2 tokens, a quarter fewer than 2); a target longer than the row can align (its "
        "tokens plus one blank between repeats) adds no loss"), "range": floats(1, 16)})

    def __post_init__(self):
        super().__post_init__()
        check_fields(self)

        def fail(name, msg):
            raise ValueError(f"NATConfig: `{name}` {msg}, got {getattr(self, name)!r}")

        if self.length not in LENGTH_STRATEGIES:
            fail("length", f"must be one of {LENGTH_STRATEGIES}")
        if not isinstance(self.max_length_offset, int) or isinstance(self.max_length_offset, bool) \
                or self.max_length_offset < 0:
            fail("max_length_offset", "must be an integer >= 0")
        if not self.row_ratio > 0:
            fail("row_ratio", "must be > 0")
        if not isinstance(self.row_extra, int) or self.row_extra < 0:
            fail("row_extra", "must be an integer >= 0")
        if self.mask_token_id is not None and not (isinstance(self.mask_token_id, int)
                                                   and 0 <= self.mask_token_id < self.tgt_vocab_size):
            fail("mask_token_id", f"must be a token id in [0, {self.tgt_vocab_size})")
        if self.mask_id in (self.pad_token_id, self.eos_token_id):
            fail("mask_token_id", "must differ from the pad and END ids")
        if not self.length_loss_weight >= 0:
            fail("length_loss_weight", "must be >= 0")
        if self.nat_loss not in NAT_LOSSES:
            fail("nat_loss", f"must be one of {NAT_LOSSES}")
        if self.nat_loss == "ctc" and self.length != "classifier":
            fail("length", "must be left at 'classifier' with nat_loss='ctc' (CTC's alignment decides the length)")

    @property
    def mask_id(self) -> int:
        return self.start_token_id if self.mask_token_id is None else self.mask_token_id

    @property
    def has_length_head(self) -> bool:
        """A length classifier: "classifier", unless CTC decides the length."""
        return self.length == "classifier" and self.nat_loss != "ctc"

    @property
    def blank_id(self) -> int:
        """CTC's blank: the pad id, which is never a target token."""
        return self.pad_token_id

    @property
    def max_target_length(self) -> int:
        """The longest row the decoder writes: target tokens (+ END for "end")."""
        return self.max_positions
