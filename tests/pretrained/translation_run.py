"""A run folder as `attnkit train translate` writes it, with a random post-LN model: what `attnkit export` reads."""

from __future__ import annotations

import hashlib
import random

import torch

from attnkit.data.bpe import BOS_ID, EOS_ID, PAD_ID, learn_bpe
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from attnkit.nn import TransformerConfig
from attnkit.train.checkpoint import save_checkpoint
from tests.tasks.corpus import pair


def texts(n=24, seed=0):
    rng = random.Random(seed)
    return [pair(rng) for _ in range(n)]


def make_run(folder, *, activation="relu", sinusoidal_layout="interleaved", share=True, seed=0):
    """A run folder with one checkpoint (best and latest) of a random post-LN model with large weights, so that
    the translations differ from sentence to sentence."""
    pairs = texts(200)
    sub = learn_bpe([s for p in pairs for s in p], 90)
    sub.save(folder / "bpe.json")
    tc = TransformerConfig(d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2, num_decoder_layers=2, dropout=0.0,
                           norm_first=False, activation=activation, sinusoidal_layout=sinusoidal_layout)
    cfg = Seq2SeqConfig(sub.size, sub.size, tc, pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                        share_embeddings=share, tie_output=share, max_positions=40)
    torch.manual_seed(seed)
    model = Seq2SeqModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(std=0.5 if "embed" in name or "lm_head" in name else p.shape[1] ** -0.5)
        for emb in (model.src_embed, model.tgt_embed):
            if emb is not None:
                emb.weight[PAD_ID].zero_()
        model.target_embedding.weight[EOS_ID] *= 2.0  # END comes at different steps
    meta = {"task": "translate", "model": cfg.to_dict(), "src_lang": "own.src", "tgt_lang": "own.tgt",
            "subwords": "bpe.json", "subwords_sha256": hashlib.sha256((folder / "bpe.json").read_bytes()).hexdigest(),
            "max_length": 40, "average": 0, "final_beam": 0}
    save_checkpoint(folder, model, meta, step=1, best=True)
    return folder
