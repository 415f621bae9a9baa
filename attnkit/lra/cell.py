"""One LRA-lite cell: train one attention variant on one task with attnkit's engine, and measure it.

The model: tokens -> embedding + learned positions -> pre-LN encoder whose self-attention is the
variant (``attnkit.nn.variants``) -> pooling -> linear (``attnkit.models.classifier``). Training is
``attnkit.train.Trainer`` (AdamW, warm-up + cosine decay, checkpoints, resume, seeds); the best dev
checkpoint is scored on the test split. Measured:

- ``test_accuracy``: on the test split;
- ``steps_per_s``: 1 / the median time between training steps (evaluations excluded by the median);
- ``peak_mb``: the peak extra memory of one training step (forward, backward) on a batch of the
  longest sequences, measured before training in this process (``attnkit.lra.memory``).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
from torch.nn.utils.rnn import pad_sequence

from ..models.classifier import ClassifierConfig, SequenceClassifier
from ..nn import TransformerConfig
from ..nn.variants import VARIANTS
from ..train import Task, TrainConfig, Trainer
from .memory import peak_memory
from .settings import TaskSettings
from .tasks import TaskData

__all__ = ["build_model", "run_cell", "collate"]


def build_model(s: TaskSettings, variant: str, data: TaskData) -> SequenceClassifier:
    enc = TransformerConfig(d_model=s.d_model, num_heads=s.num_heads, d_ff=s.d_ff, num_encoder_layers=s.num_layers,
                            num_decoder_layers=0, dropout=s.dropout, activation="gelu", norm_first=True,
                            positional="learned", max_len=s.seq_len)
    cfg = ClassifierConfig(data.vocab_size, data.num_classes, pooling=s.pooling, encoder=enc, attention=variant,
                           attention_options=s.options_for(variant))
    return SequenceClassifier(cfg)


def collate(examples):
    """[(tokens (L_i,), label)] -> tokens (B, max L_i) zero-padded, lengths (B,), labels (B,)."""
    tokens = pad_sequence([e[0] for e in examples], batch_first=True)
    return tokens, torch.tensor([len(e[0]) for e in examples]), torch.tensor([e[1] for e in examples])


def _forward(model, batch):
    tokens, lengths, labels = batch
    return model(tokens, lengths), labels


def _step_memory(model, data: TaskData, batch_size: int) -> float | None:
    """Peak extra MB of one forward + backward on the ``batch_size`` longest training sequences."""
    longest = sorted(data.train, key=lambda e: -len(e[0]))[:batch_size]
    tokens, lengths, labels = collate(longest)

    def step():
        model.train()
        loss = torch.nn.functional.cross_entropy(model(tokens, lengths), labels)
        loss.backward()
        model.zero_grad(set_to_none=True)

    return peak_memory(step)[1]


def run_cell(task: str, variant: str, s: TaskSettings, data: TaskData, out_dir: str | Path, *, seed: int = 0,
             progress: bool = False, resume: bool = False) -> dict:
    """Train and measure one cell; returns its result row (also what ``cell.json`` holds)."""
    if variant not in VARIANTS:
        raise ValueError(f"lra: unknown variant {variant!r}; known: {sorted(VARIANTS)}")
    torch.manual_seed(seed)
    model = build_model(s, variant, data)
    peak = _step_memory(model, data, s.batch_size)
    lengths = [len(e[0]) for e in data.train]
    task_ = Task(f"lra-{task}", model, data.train, collate, _forward, dev=data.val, test=data.test,
                 meta={"settings": s.to_dict(), "variant": variant, "model": model.config.to_dict()},
                 lengths=lengths if len(set(lengths)) > 1 else None)
    cfg = TrainConfig(max_steps=s.steps, batch_size=s.batch_size, lr=s.lr, warmup_steps=s.warmup_steps,
                      weight_decay=s.weight_decay, schedule="cosine", seed=seed, eval_every=max(1, s.steps // s.evals),
                      eval_batch_size=2 * s.batch_size, log_every=max(1, min(50, s.steps // 4)), keep=1,
                      progress=progress)
    stamps: list[float] = []
    result = Trainer(task_, cfg, on_step=lambda tr, step, rec: stamps.append(time.perf_counter())).fit(
        out_dir, resume=resume)
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return {
        "task": task, "variant": variant, "exact": VARIANTS[variant].exact, "seed": seed,
        "test_accuracy": result["test"]["accuracy"] if "test" in result else None,
        "best_dev_accuracy": result.get("best_dev", {}).get("accuracy"),
        "steps": result["step"], "steps_per_s": 1.0 / statistics.median(gaps) if gaps else None,
        "train_seconds": result["train_seconds"], "peak_mb": peak, "params": result["params"],
        "seq_len": s.seq_len, "batch_size": s.batch_size, "threads": torch.get_num_threads(),
    }
