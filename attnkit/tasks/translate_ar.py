"""The autoregressive side of the translate task: ``attnkit train translate`` (``--decoder ar``, the default).

Trains ``models.seq2seq.Seq2SeqModel`` with teacher forcing (each target position predicted from the ones
before it; label smoothing, the output layer run on real tokens only) and loads its runs as ``Translator``
(``generate``: greedy, beam search, sampling). ``AR`` is this side's ``translation.Decoding``.
"""

from __future__ import annotations

import torch

from ..data.bpe import BOS_ID, EOS_ID, PAD_ID, Subwords
from ..models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from ..train import IGNORE, Task
from .translation import Decoding
from .translator import Translator

__all__ = ["AR", "encode_pair", "collate", "forward"]


def encode_pair(subwords: Subwords, src: str, tgt: str, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(source ids + EOS, BOS + target ids + EOS), each cut to ``max_length`` subwords first."""
    s = subwords.encode(src)[: max_length - 1] + [EOS_ID]
    t = [BOS_ID] + subwords.encode(tgt)[: max_length - 1] + [EOS_ID]
    return torch.tensor(s), torch.tensor(t)


def collate(examples):
    """[(src (S_i,), tgt (T_i,))] -> src (B, S), src mask (B, S), decoder input (B, T-1), labels (B, T-1)."""
    b = len(examples)
    s_max = max(len(e[0]) for e in examples)
    t_max = max(len(e[1]) for e in examples)
    src = torch.full((b, s_max), PAD_ID, dtype=torch.long)
    tgt = torch.full((b, t_max), PAD_ID, dtype=torch.long)
    for i, (s, t) in enumerate(examples):
        src[i, :len(s)], tgt[i, :len(t)] = s, t
    labels = tgt[:, 1:].masked_fill(tgt[:, 1:] == PAD_ID, IGNORE)
    return src, (src != PAD_ID).long(), tgt[:, :-1], labels


def forward(model, batch):
    src, mask, dec_in, labels = batch
    keep = labels != IGNORE
    return model(src, mask, dec_in, positions=keep), labels[keep]  # (N, V), (N,): padding never reaches the output


class Autoregressive(Decoding):
    def check_arguments(self, args) -> None:
        if args.teacher is not None:
            raise ValueError("train translate: --teacher (sequence-level distillation) is for --decoder nat")
        if getattr(args, "init", None) is not None:
            raise ValueError("train translate: --init (start from an autoregressive run's weights) is for --decoder "
                             "nat")

    def build(self, name, args, fields, subwords, train, dev, meta, seed) -> Task:
        cfg = Seq2SeqConfig(**fields)
        torch.manual_seed(seed)
        model = Seq2SeqModel(cfg)
        meta = {"model": cfg.to_dict(), **meta}
        train_x = [encode_pair(subwords, s, t, args.max_length) for s, t in zip(train.src, train.tgt)]
        dev_x = [encode_pair(subwords, s, t, args.max_length) for s, t in zip(dev.src, dev.tgt)] if dev else None
        return Task(name, model, train_x, collate, forward, dev=dev_x, meta=meta,
                    lengths=[max(len(s), len(t)) for s, t in train_x])

    def task_for(self, model, meta: dict, name: str) -> Task:
        return Task(name, model, [None], collate, forward, meta=meta)

    def final_kwargs(self, beam: int) -> dict:
        return {"num_beams": beam}


AR = Autoregressive("ar", Seq2SeqModel, Seq2SeqConfig, Translator)
