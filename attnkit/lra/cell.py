"""One LRA-lite cell: train one attention variant on one task with attnkit's engine, and measure it.

The model (``attnkit.lra.model``): tokens -> embedding + learned positions -> pre-LN encoder whose
self-attention is the variant (``attnkit.nn.variants``) -> pooling -> linear; MQAR scores every query
position instead of pooling. Training is ``attnkit.train.Trainer`` (AdamW, warm-up + cosine decay,
checkpoints, resume, seeds); the best dev checkpoint is scored on the test split. With
``pretrain_steps`` the encoder first learns to fill in masked input tokens of the training inputs
(self-pretraining, Amos et al. 2024; ``attnkit.lra.pretrain``), in ``<out>/pretrain``. Measured:

- ``test_accuracy``: on the test split (MQAR: of the queries);
- ``steps_per_s``: 1 / the median time between training steps (evaluations excluded by the median);
- ``peak_mb``: the peak extra memory of one training step (forward, backward) on a batch of the
  longest sequences, measured before training in this process (``attnkit.lra.memory``);
- ``dev_curve``: [step, dev accuracy] at each evaluation; ``by_depth`` (ListOps): test accuracy per
  nesting depth.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch
from torch.nn.utils.rnn import pad_sequence

from ..nn.variants import VARIANTS
from ..train import Task, TrainConfig, Trainer
from ..train.metrics import IGNORE
from .depth import model_by_depth
from .memory import peak_memory
from .model import PerPosition, build_model
from .pretrain import pretrain
from .settings import TaskSettings
from .tasks import TaskData

__all__ = ["run_cell", "collate", "collate_targets", "make_model", "dev_curve"]


def collate(examples):
    """[(tokens (L_i,), label)] -> tokens (B, max L_i) zero-padded, lengths (B,), labels (B,)."""
    tokens = pad_sequence([e[0] for e in examples], batch_first=True)
    return tokens, torch.tensor([len(e[0]) for e in examples]), torch.tensor([e[1] for e in examples])


def collate_targets(examples):
    """[(tokens (L_i,), targets (L_i,))] -> tokens (B, L) zero-padded, lengths (B,), targets (B, L) IGNORE-padded."""
    tokens = pad_sequence([e[0] for e in examples], batch_first=True)
    targets = pad_sequence([e[1] for e in examples], batch_first=True, padding_value=IGNORE)
    return tokens, torch.tensor([len(e[0]) for e in examples]), targets


def _forward(model, batch):
    tokens, lengths, labels = batch
    return model(tokens, lengths), labels


def _forward_positions(model, batch):
    """Scores of the asked positions only: (N asked, C), their targets (N,)."""
    tokens, lengths, targets = batch
    asked = targets != IGNORE  # (B, L)
    return model(tokens, lengths)[asked], targets[asked]


def make_model(s: TaskSettings, variant: str, data: TaskData) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(the classifier body, the module trained on the labels: the body, or MQAR's ``PerPosition``). With
    self-pretraining the vocabulary has one more id, the mask (``data.vocab_size``)."""
    body = build_model(s, variant, data.vocab_size + (1 if s.pretrain_steps else 0), data.num_classes)
    return body, (PerPosition(body, shift=s.token_shift) if s.task == "mqar" else body)


def _step_memory(model, data: TaskData, batch_size: int, per_position: bool) -> float | None:
    """Peak extra MB of one forward + backward on the ``batch_size`` longest training sequences."""
    longest = sorted(data.train, key=lambda e: -len(e[0]))[:batch_size]
    batch = (collate_targets if per_position else collate)(longest)
    forward = _forward_positions if per_position else _forward

    def step():
        model.train()
        scores, targets = forward(model, batch)
        torch.nn.functional.cross_entropy(scores, targets).backward()
        model.zero_grad(set_to_none=True)

    return peak_memory(step)[1]


def dev_curve(run_dir: str | Path) -> list[list[float]]:
    """[[step, dev accuracy], ...] from a run's metrics.jsonl."""
    path = Path(run_dir) / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [[r["step"], r["accuracy"]] for r in rows if r.get("split") == "dev"]


def _train_config(s: TaskSettings, seed: int, progress: bool) -> TrainConfig:
    return TrainConfig(max_steps=s.steps, batch_size=s.batch_size, lr=s.lr, warmup_steps=s.warmup_steps,
                       weight_decay=s.weight_decay, schedule="cosine", seed=seed,
                       eval_every=max(1, s.steps // s.evals), eval_batch_size=2 * s.batch_size,
                       log_every=max(1, min(50, s.steps // 4)), keep=1, progress=progress)


def run_cell(task: str, variant: str, s: TaskSettings, data: TaskData, out_dir: str | Path, *, seed: int = 0,
             progress: bool = False, resume: bool = False) -> dict:
    """Train and measure one cell of task ``task`` (settings ``s``); returns its result row (``cell.json``)."""
    if variant not in VARIANTS:
        raise ValueError(f"lra: unknown variant {variant!r}; known: {sorted(VARIANTS)}")
    out_dir = Path(out_dir)
    torch.manual_seed(seed)
    per_position = s.task == "mqar"
    body, model = make_model(s, variant, data)
    peak = _step_memory(model, data, s.batch_size, per_position)
    pre = pretrain(body, s, data, out_dir / "pretrain", seed=seed, progress=progress, resume=resume) \
        if s.pretrain_steps else None
    lengths = [len(e[0]) for e in data.train]
    task_ = Task(f"lra-{task}", model, data.train, collate_targets if per_position else collate,
                 _forward_positions if per_position else _forward, dev=data.val, test=data.test,
                 meta={"settings": s.to_dict(), "variant": variant, "model": model.config.to_dict()},
                 lengths=lengths if len(set(lengths)) > 1 else None)
    stamps: list[float] = []
    run_dir = out_dir / "train" if pre is not None else out_dir
    result = Trainer(task_, _train_config(s, seed, progress),
                     on_step=lambda tr, step, rec: stamps.append(time.perf_counter())).fit(run_dir, resume=resume)
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    row = {
        "task": task, "variant": variant, "exact": VARIANTS[variant].exact, "seed": seed,
        "test_accuracy": result["test"]["accuracy"] if "test" in result else None,
        "best_dev_accuracy": result.get("best_dev", {}).get("accuracy"),
        "steps": result["step"], "steps_per_s": 1.0 / statistics.median(gaps) if gaps else None,
        "train_seconds": result["train_seconds"] + (pre["train_seconds"] if pre else 0.0), "peak_mb": peak,
        "params": result["params"], "seq_len": s.seq_len, "batch_size": s.batch_size,
        "threads": torch.get_num_threads(), "dev_curve": dev_curve(run_dir),
    }
    if pre is not None:
        row["pretrain"] = {"steps": pre["step"], "seconds": pre["train_seconds"], "dev_curve": dev_curve(pre["out"])}
    if s.task == "listops" and "test" in result:  # the best checkpoint's weights are in the model
        row["by_depth"] = model_by_depth(model, data.test, collate, 2 * s.batch_size)
    return row
