"""Training throughput of the Multi30k translation model against Hugging Face's MarianMTModel and
``torch.nn.Transformer`` of the same shape: target tokens per second of forward + backward + AdamW step.

    .venv/bin/python bench/translation_throughput.py [--threads 2] [--rounds 5] [--steps 8] [--bf16]

All three get the same real batches (Multi30k De->En, joint BPE, a 3000-token budget, bucketed by
length), the same sizes (d_model 256, 4 heads, FFN 1024, 3 + 3 layers, one shared 8000-entry
embedding tied to the output, post-LN, ReLU, dropout 0.1, sinusoidal positions), the same loss
(cross-entropy with label smoothing 0.1). Rounds interleave the models so load affects all alike;
the table shows medians. attnkit's row "pre-LN" is the configuration ``attnkit train translate`` uses.
"""

from __future__ import annotations

import argparse
import datetime
import math
import random
import statistics
import time

import torch
import torch.nn.functional as F
from _timing import machine, table
from torch import nn

from attnkit.data.bpe import learn_bpe
from attnkit.data.multi30k import multi30k
from attnkit.functional.positional import sinusoidal_table
from attnkit.models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from attnkit.nn import TransformerConfig
from attnkit.tasks.translate import collate, encode_pair
from attnkit.train import IGNORE
from attnkit.train.batches import token_batches

D, H, FF, N, V = 256, 4, 1024, 3, 8000


class TorchTransformer(nn.Module):
    """torch.nn.Transformer with the same embeddings, positions and tied output layer as the others."""

    def __init__(self, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, D, padding_idx=0)
        self.core = nn.Transformer(D, H, N, N, FF, dropout=0.1, batch_first=True)
        self.register_buffer("pos", sinusoidal_table(512, D), persistent=False)
        self.drop = nn.Dropout(0.1)

    def forward(self, src, mask, dec_in):
        s = self.drop(self.embed(src) * math.sqrt(D) + self.pos[: src.shape[1]])
        t = self.drop(self.embed(dec_in) * math.sqrt(D) + self.pos[: dec_in.shape[1]])
        causal = nn.Transformer.generate_square_subsequent_mask(dec_in.shape[1], dtype=s.dtype)
        pad = mask == 0
        h = self.core(s, t, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad, tgt_is_causal=True)
        return F.linear(h, self.embed.weight)  # (B, T, V)


def marian(vocab: int):
    from transformers import MarianConfig, MarianMTModel

    cfg = MarianConfig(vocab_size=vocab, d_model=D, encoder_layers=N, decoder_layers=N, encoder_attention_heads=H,
                       decoder_attention_heads=H, encoder_ffn_dim=FF, decoder_ffn_dim=FF, activation_function="relu",
                       dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, max_position_embeddings=512,
                       pad_token_id=0, eos_token_id=2, decoder_start_token_id=1, scale_embedding=True)
    return MarianMTModel(cfg)


def ours(vocab: int, norm_first: bool) -> Seq2SeqModel:
    tc = TransformerConfig(d_model=D, num_heads=H, d_ff=FF, num_encoder_layers=N, num_decoder_layers=N, dropout=0.1,
                           norm_first=norm_first)
    return Seq2SeqModel(Seq2SeqConfig(vocab, vocab, tc, share_embeddings=True))


def step_fn(kind: str, model: nn.Module, bf16: bool):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(batch) -> int:
        src, mask, dec_in, labels = batch
        keep = labels != IGNORE
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if kind == "attnkit":
                logits, target = model(src, mask, dec_in, positions=keep), labels[keep]
            elif kind == "marian":
                out = model(input_ids=src, attention_mask=mask, decoder_input_ids=dec_in).logits
                logits, target = out.reshape(-1, out.shape[-1]), labels.reshape(-1)
            else:
                out = model(src, mask, dec_in)
                logits, target = out.reshape(-1, out.shape[-1]), labels.reshape(-1)
        loss = F.cross_entropy(logits.float(), target, ignore_index=IGNORE, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return int(keep.sum())

    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=8, help="batches per model per round")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast for all")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    train = multi30k("train")
    sw = learn_bpe(train.src + train.tgt, V)
    ex = [encode_pair(sw, s, t, 128) for s, t in zip(train.src[:8000], train.tgt[:8000])]
    lens = [max(len(s), len(t)) for s, t in ex]
    order = sorted(range(len(ex)), key=lambda i: (lens[i], i))
    batches = token_batches(order, lens, 3000)
    random.Random(0).shuffle(batches)
    need = args.steps * args.rounds + 2
    batches = [collate([ex[j] for j in b]) for b in (batches * (1 + need // len(batches)))[:need]]
    torch.manual_seed(0)
    models = {"attnkit (post-LN)": ("attnkit", ours(sw.size, False)),
              "attnkit (pre-LN)": ("attnkit", ours(sw.size, True)),
              "HF MarianMTModel": ("marian", marian(sw.size)),
              "torch.nn.Transformer": ("torch", TorchTransformer(sw.size))}
    steps = {k: step_fn(kind, m.train(), args.bf16) for k, (kind, m) in models.items()}
    for fn in steps.values():  # warm-up: allocator, oneDNN primitives
        fn(batches[0])
        fn(batches[1])
    rates: dict[str, list[float]] = {k: [] for k in steps}
    for r in range(args.rounds):
        chunk = batches[2 + r * args.steps: 2 + (r + 1) * args.steps]
        for k, fn in steps.items():
            t0 = time.perf_counter()
            toks = sum(fn(b) for b in chunk)
            rates[k].append(toks / (time.perf_counter() - t0))
    med = {k: statistics.median(v) for k, v in rates.items()}
    best_peer = max(med["HF MarianMTModel"], med["torch.nn.Transformer"])
    trainable = {k: sum(p.numel() for p in m.parameters() if p.requires_grad) for k, (_, m) in models.items()}
    rows = [[k, trainable[k], f"{med[k]:.0f}", f"{min(rates[k]):.0f}-{max(rates[k]):.0f}", med[k] / best_peer]
            for k in med]
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {machine()}, "
          f"{'bfloat16 autocast' if args.bf16 else 'float32'}, {args.rounds} rounds x {args.steps} batches")
    print(table(["model", "parameters", "target tok/s (median)", "range", "x faster peer"], rows))


if __name__ == "__main__":
    main()
