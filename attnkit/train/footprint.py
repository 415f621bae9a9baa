"""A rough estimate of the memory a training run needs, made from its settings before anything is built.

``training_bytes`` counts float32 parameters with their gradients and AdamW's two moments (16 bytes a
parameter), and one batch's activations kept for the backward pass (each layer's token vectors, its
feed-forward hidden layer and its attention matrices, and the output logits). It leaves out allocator
caches and data, so it is a lower bound of the real peak, meant to catch settings that cannot fit at all.
"""

from __future__ import annotations

from ..nn import TransformerConfig
from ..nn.limits import check_memory

__all__ = ["training_bytes", "check_training_memory"]

FLOAT = 4  # bytes of a float32


def training_bytes(cfg: TransformerConfig, *, vocab: int, tokens: int, seq_len: int) -> int:
    """Bytes of a training step of ``cfg``'s stacks with a ``vocab``-entry embedding and output layer, on a batch
    of ``tokens`` tokens in sequences of ``seq_len`` (an estimate, see the module doc)."""
    d, f, h = cfg.d_model, cfg.d_ff, cfg.num_heads
    enc, dec = cfg.num_encoder_layers, cfg.num_decoder_layers
    params = enc * (4 * d * d + 2 * d * f) + dec * (8 * d * d + 2 * d * f) + vocab * d
    if cfg.positional == "learned":
        params += cfg.max_len * d
    sequences = max(1, tokens // max(seq_len, 1))
    per_token = (enc + dec) * (8 * d + 2 * f) + 2 * vocab  # layer activations, logits and their gradient
    attention = (enc + 2 * dec) * sequences * h * seq_len * seq_len * 2  # scores and weights per attention
    return 4 * FLOAT * params + FLOAT * (tokens * per_token + attention)


def check_training_memory(what: str, cfg: TransformerConfig, *, vocab: int, tokens: int, seq_len: int,
                          available: int | None = None) -> int:
    """``training_bytes``; a one-line ValueError naming ``what`` when it exceeds the memory available."""
    need = training_bytes(cfg, vocab=vocab, tokens=tokens, seq_len=seq_len)
    check_memory(need, f"{what} (parameters, AdamW state and one batch's activations)", available)
    return need
