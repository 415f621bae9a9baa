"""``Seq2SeqConfig``: an encoder-decoder's settings over token ids (``attnkit.models.seq2seq`` builds the model)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

from ...nn import TransformerConfig

__all__ = ["Seq2SeqConfig"]


@dataclass(frozen=True)
class Seq2SeqConfig:
    """An encoder-decoder over token ids.

    ``transformer``: the stacks (sizes, pre-/post-LN, positions, activation, dropout). Token ids:
    ``pad_token_id`` (ignored by attention, its embedding row stays zero), ``bos_token_id``,
    ``eos_token_id`` (END), ``decoder_start_token_id`` (the decoder's first input; None = BOS;
    Marian uses the pad id). ``share_embeddings``: one table for source and target (a joint
    vocabulary, so both sizes must be equal); ``tie_output``: the output projection is the target
    embedding's transpose; ``scale_embedding``: embeddings times sqrt(d_model) before the positions
    are added; ``final_logits_bias``: a fixed (not trained) bias on the logits, all zeros here (Marian
    checkpoints carry one). ``max_positions``: the longest source and target the model is meant for;
    longer inputs are truncated by the tasks.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    transformer: TransformerConfig = field(default_factory=TransformerConfig)
    pad_token_id: int = 0
    bos_token_id: int = 1
    eos_token_id: int = 2
    decoder_start_token_id: int | None = None
    share_embeddings: bool = False
    tie_output: bool = True
    scale_embedding: bool = True
    final_logits_bias: bool = False
    max_positions: int = 256

    def __post_init__(self):
        def fail(name, msg):
            raise ValueError(f"Seq2SeqConfig: `{name}` {msg}, got {getattr(self, name)!r}")

        for name in ("src_vocab_size", "tgt_vocab_size", "max_positions"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                fail(name, "must be a positive integer")
        if not isinstance(self.transformer, TransformerConfig):
            fail("transformer", "must be a TransformerConfig")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            v = getattr(self, name)
            if v is None and name == "decoder_start_token_id":
                continue
            limit = self.src_vocab_size if name == "pad_token_id" else self.tgt_vocab_size
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < min(limit, self.tgt_vocab_size):
                fail(name, f"must be a token id in [0, {min(limit, self.tgt_vocab_size)})")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(f"Seq2SeqConfig: `share_embeddings` needs one vocabulary, got src_vocab_size "
                             f"{self.src_vocab_size} and tgt_vocab_size {self.tgt_vocab_size}")
        if self.transformer.num_encoder_layers < 1 or self.transformer.num_decoder_layers < 1:
            raise ValueError("Seq2SeqConfig: `transformer` needs at least one encoder and one decoder layer, got "
                             f"{self.transformer.num_encoder_layers} and {self.transformer.num_decoder_layers}")

    @property
    def start_token_id(self) -> int:
        return self.bos_token_id if self.decoder_start_token_id is None else self.decoder_start_token_id

    def replace(self, **changes) -> Seq2SeqConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Seq2SeqConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"Seq2SeqConfig: unknown keys {unknown}")
        d = dict(d)
        if isinstance(d.get("transformer"), dict):
            d["transformer"] = TransformerConfig.from_dict(d["transformer"])
        return cls(**d)
