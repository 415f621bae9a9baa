"""Self-pretraining (Amos et al. 2024, "Never Train from Scratch"): before a cell sees its labels, its
encoder learns to fill in masked tokens of the task's own training inputs, with no other data.

A share ``pretrain_mask`` of each sequence's tokens is replaced by the mask id (``data.vocab_size``, the
extra id of the cell's vocabulary) and a linear layer on the encoder predicts the original ids there.
The training masks are drawn from torch's generator inside the engine's seeded, resumable state; the
dev masks once, from the seed. The run is ``attnkit.train.Trainer``'s (its own folder and metrics: dev
accuracy = masked tokens recovered); the body keeps what it learned, the prediction layer is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

from ..train import Task, TrainConfig, Trainer
from ..train.metrics import IGNORE
from .model import PerPosition
from .settings import TaskSettings
from .tasks import TaskData

__all__ = ["pretrain", "mask_tokens"]


def mask_tokens(tokens: Tensor, rate: float, mask_id: int, generator: torch.Generator | None = None
                ) -> tuple[Tensor, Tensor]:
    """tokens (L,) (0 = padding) -> (input (L,) with a ``rate`` share of the real tokens replaced by
    ``mask_id``, targets (L,): the original id where masked, ``IGNORE`` elsewhere). At least one is masked."""
    real = tokens != 0
    chosen = (torch.rand(tokens.shape, generator=generator) < rate) & real
    if not chosen.any() and real.any():
        chosen[int(real.nonzero()[0])] = True
    return torch.where(chosen, mask_id, tokens), torch.where(chosen, tokens, IGNORE)


class _Masked(Sequence):
    """The examples' tokens with fresh masks at each access (torch's generator: the engine seeds and resumes it):
    item i = (masked tokens (L,), targets (L,))."""

    def __init__(self, examples: Sequence, rate: float, mask_id: int):
        self.examples, self.rate, self.mask_id = examples, rate, mask_id

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        return mask_tokens(self.examples[i][0], self.rate, self.mask_id)


def _fixed(examples, rate: float, mask_id: int, seed: int) -> list[tuple[Tensor, Tensor]]:
    """[(masked tokens, targets)] drawn once from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return [mask_tokens(e[0], rate, mask_id, g) for e in examples]


def _collate(examples):
    """[(masked tokens (L_i,), targets (L_i,))] -> tokens (B, L), lengths (B,), targets (B, L) IGNORE-padded."""
    return (pad_sequence([e[0] for e in examples], batch_first=True), torch.tensor([len(e[0]) for e in examples]),
            pad_sequence([e[1] for e in examples], batch_first=True, padding_value=IGNORE))


def _forward(model, batch):
    tokens, lengths, targets = batch
    asked = targets != IGNORE
    return model(tokens, lengths)[asked], targets[asked]


def pretrain(body: nn.Module, s: TaskSettings, data: TaskData, out_dir: str | Path, *, seed: int = 0,
             progress: bool = False, resume: bool = False) -> dict:
    """``s.pretrain_steps`` steps of masked-token prediction on ``data.train``'s inputs; returns the
    engine's result (with ``out``). ``body`` (a ``SequenceClassifier`` with ``data.vocab_size + 1`` ids)
    is trained in place."""
    mask_id = data.vocab_size
    if body.config.vocab_size != mask_id + 1:
        raise ValueError(f"lra pretrain: the model has {body.config.vocab_size} token ids; self-pretraining needs "
                         f"the data's {data.vocab_size} plus one for the mask")
    model = PerPosition(body, nn.Linear(body.config.encoder.d_model, data.vocab_size))
    dev = _fixed(data.val, s.pretrain_mask, mask_id, seed)
    lengths = [len(e[0]) for e in data.train]
    task = Task("lra-pretrain", model, _Masked(data.train, s.pretrain_mask, mask_id), _collate, _forward,
                dev=dev, meta={"settings": s.to_dict(), "model": body.config.to_dict()},
                lengths=lengths if len(set(lengths)) > 1 else None)
    cfg = TrainConfig(max_steps=s.pretrain_steps, batch_size=s.batch_size, lr=s.pretrain_lr,
                      warmup_steps=max(1, s.pretrain_steps // 10), weight_decay=s.weight_decay, schedule="cosine",
                      seed=seed, eval_every=s.pretrain_steps, eval_batch_size=2 * s.batch_size,
                      log_every=max(1, min(50, s.pretrain_steps // 4)), keep=1, progress=progress)
    result = Trainer(task, cfg).fit(out_dir, resume=resume)
    return {**result, "out": str(out_dir)}
