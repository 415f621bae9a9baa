"""The training engine: a plain PyTorch loop any task plugs into.

How a task plugs in: build a ``Task`` with

- ``name``: a string stored in the checkpoint (``evaluate`` / ``predict`` refuse another task's checkpoint);
- ``model``: an ``nn.Module``;
- ``train`` (and optionally ``dev``, ``test``): sequences of examples, any Python objects;
- ``collate(examples) -> batch``: tensors, in a dict / tuple / list (moved to the device for you);
- ``forward(model, batch) -> (logits (N, C), targets (N,))``: the engine takes cross-entropy
  (with label smoothing) and counts accuracy; targets equal to ``IGNORE`` (-100) are skipped, which
  covers padding, non-first subwords and unlabelled graph nodes. A third item, a scalar loss tensor,
  is added to the training loss (e.g. the graph task's self-supervised edge loss); evaluation ignores it;
- ``meta``: a JSON-able dict (model config, vocabulary, label set) saved next to the weights;
- ``lengths`` (optional): one size per train example; batches are then bucketed by length.

Then ``Trainer(task, TrainConfig(...)).fit(out_dir, resume=...)``. The engine gives AdamW, warm-up
then decay (``attnkit.train.schedule``), gradient clipping, label smoothing, seeds, optional bfloat16
autocast, tqdm progress, ``metrics.jsonl`` + ``curves.png``, atomic checkpoints, ``--resume`` with
optimiser / scheduler / RNG state (same result as an uninterrupted run), Ctrl-C = save and stop,
and DistributedDataParallel when launched by torchrun (``attnkit.train.distributed``).
"""

from __future__ import annotations

import math
import random
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import distributed as dist
from .checkpoint import load_meta, load_trainer_state, load_weights, save_checkpoint
from .metrics import IGNORE, MetricsLog, count_correct, plot_curves
from .schedule import SCHEDULES, make_scheduler


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings. ``max_steps`` > 0 overrides ``epochs``; ``eval_every`` 0 = once per epoch."""

    epochs: int = field(default=10, metadata={"help": "passes over the training data (unless max_steps > 0)"})
    max_steps: int = field(default=0, metadata={
        "help": "stop after this many optimiser steps, overriding epochs (0 = run the epochs)"})
    batch_size: int = field(default=32, metadata={
        "help": "training examples per step (per process under torchrun)"})
    lr: float = field(default=1e-3, metadata={"help": "peak learning rate of AdamW, reached after the warm-up"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW's decoupled weight decay (0 = none)"})
    schedule: str = field(default="linear", metadata={
        "help": "learning rate after the warm-up: linear or cosine decay to 0, inverse_sqrt (the paper's "
                "1/sqrt(step) decay), or constant",
        "choices": SCHEDULES})
    warmup_steps: int = field(default=100, metadata={
        "help": "steps of linear warm-up from 0 to lr (0 = none; inverse_sqrt peaks at this step)"})
    clip_norm: float = field(default=1.0, metadata={
        "help": "clip the gradient's global norm to this (0 = no clipping)"})
    label_smoothing: float = field(default=0.0, metadata={
        "help": "label smoothing of the cross-entropy, in [0, 1)"})
    seed: int = field(default=0, metadata={"help": "random seed: initialisation, batch order, dropout"})
    bf16: bool = field(default=False, metadata={"help": "compute in bfloat16 autocast (weights stay float32)"})
    eval_every: int = field(default=0, metadata={
        "help": "score the dev set every this many steps (0 = at the end of each epoch)"})
    log_every: int = field(default=20, metadata={
        "help": "write the training loss to metrics.jsonl every this many steps"})
    eval_batch_size: int = field(default=128, metadata={"help": "examples per batch when scoring dev and test"})
    keep: int = field(default=2, metadata={
        "help": "newest checkpoints kept on disk, besides the best and the latest (0 = only those two)"})
    max_minutes: float = field(default=0.0, metadata={
        "help": "stop training after this many minutes of wall-clock time (0 = no limit)"})
    progress: bool = field(default=True, metadata={"help": "progress bars on stderr"})

    def __post_init__(self):
        def fail(name, msg):
            raise ValueError(f"TrainConfig: `{name}` {msg}, got {getattr(self, name)!r}")

        for name in ("epochs", "batch_size", "eval_batch_size", "log_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                fail(name, "must be a positive integer")
        for name in ("max_steps", "warmup_steps", "eval_every", "keep", "seed"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                fail(name, "must be an integer >= 0")
        if not self.lr > 0:
            fail("lr", "must be > 0")
        if self.weight_decay < 0 or self.clip_norm < 0 or self.max_minutes < 0:
            bad = [n for n in ("weight_decay", "clip_norm", "max_minutes") if getattr(self, n) < 0]
            fail(bad[0], "must be >= 0")
        if not 0.0 <= self.label_smoothing < 1.0:
            fail("label_smoothing", "must be in [0, 1)")
        if self.schedule not in SCHEDULES:
            fail("schedule", f"must be one of {SCHEDULES}")


@dataclass
class Task:
    """What a task supplies to the engine (see the module docstring)."""

    name: str
    model: nn.Module
    train: Sequence
    collate: Callable[[list], Any]
    forward: Callable[[nn.Module, Any], tuple[Tensor, Tensor]]
    dev: Sequence | None = None
    test: Sequence | None = None
    meta: dict = field(default_factory=dict)
    lengths: Sequence[int] | None = None


def to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def _tqdm(**kw):
    from tqdm.auto import tqdm

    return tqdm(dynamic_ncols=True, **kw)


@torch.no_grad()
def evaluate(task: Task, model: nn.Module, data: Sequence, *, batch_size: int = 128, bf16: bool = False,
             device: torch.device | str = "cpu", progress: bool = True, desc: str = "eval") -> dict:
    """Accuracy and mean loss of ``model`` on ``data`` (sharded over torchrun processes, then summed)."""
    if len(data) == 0:
        raise ValueError(f"evaluate: the {desc} dataset is empty")
    was = model.training
    model.eval()
    r, w = dist.rank(), dist.world_size()
    idx = list(range(r, len(data), w))
    try:  # batches of similar lengths pad less (examples whose first field has a length: token ids)
        idx.sort(key=lambda j: len(data[j][0]))
    except TypeError:
        pass
    correct = counted = loss_sum = 0.0
    bar = _tqdm(total=len(idx), desc=desc, leave=False, disable=not (progress and dist.is_main()))
    for i in range(0, len(idx), batch_size):
        chunk = [data[j] for j in idx[i:i + batch_size]]
        batch = to_device(task.collate(chunk), torch.device(device))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits, targets = task.forward(model, batch)[:2]
        logits = logits.float()
        c, n = count_correct(logits, targets)
        if n:
            loss_sum += float(F.cross_entropy(logits, targets, ignore_index=IGNORE, reduction="sum"))
        correct, counted = correct + c, counted + n
        bar.update(len(chunk))
    bar.close()
    correct, counted, loss_sum = dist.all_reduce_sum([correct, counted, loss_sum])
    model.train(was)
    return {"accuracy": correct / max(counted, 1), "loss": loss_sum / max(counted, 1), "count": int(counted)}


class Trainer:
    """Runs ``task`` with ``config``; ``fit(out_dir, resume)`` returns the final metrics."""

    def __init__(self, task: Task, config: TrainConfig, *, device: torch.device | str = "cpu",
                 on_step: Callable[[Trainer, int, dict], None] | None = None):
        if len(task.train) == 0:
            raise ValueError(f"Trainer: the training set of task {task.name!r} is empty")
        if task.lengths is not None and len(task.lengths) != len(task.train):
            raise ValueError(f"Trainer: `lengths` has {len(task.lengths)} entries, train {len(task.train)}")
        self.task, self.config, self.device, self.on_step = task, config, torch.device(device), on_step
        self._stop = False
        self._plotted = -1e9

    def request_stop(self) -> None:
        """Finish the current step, save a checkpoint, return (what Ctrl-C does)."""
        self._stop = True

    # -- batches -------------------------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """This process's batches (lists of train indices) for ``epoch``; depends on seed and epoch only."""
        cfg, w, r = self.config, dist.world_size(), dist.rank()
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch)
        perm = torch.randperm(len(self.task.train), generator=g).tolist()
        gb = cfg.batch_size * w
        if self.task.lengths is not None:  # bucket: sort chunks of 50 batches by length
            lens, chunk = self.task.lengths, gb * 50
            perm = [i for s in range(0, len(perm), chunk)
                    for i in sorted(perm[s:s + chunk], key=lambda i: lens[i])]
        groups = [perm[s:s + gb] for s in range(0, len(perm), gb)]
        groups = [b for b in groups if len(b) >= w]
        order = torch.randperm(len(groups), generator=g).tolist()
        return [groups[i][r::w] for i in order]

    # -- state ---------------------------------------------------------------------------------
    def _meta(self, metrics: dict) -> dict:
        return {**self.task.meta, "task": self.task.name, "train_config": asdict(self.config),
                "metrics": metrics}

    def _save(self, out: Path, model, opt, sched, step, pos, best_flag, metrics, extra, final=False) -> None:
        if dist.is_main():
            state = {"step": step, "epoch": pos[0], "batch": pos[1], "optimizer": opt.state_dict(),
                     "scheduler": sched.state_dict(), "torch_rng": torch.get_rng_state(),
                     "python_rng": random.getstate(), **extra}
            save_checkpoint(out, dist.unwrap(model), self._meta(metrics), step=step, trainer_state=state,
                            best=best_flag, keep=self.config.keep)
            now = time.perf_counter()
            if final or now - self._plotted > 60:  # matplotlib is slow: at most once a minute, and at the end
                plot_curves(out / "metrics.jsonl", out / "curves.png", title=self.task.name)
                self._plotted = now
        dist.barrier()

    def _optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": self.config.weight_decay},
                                  {"params": no_decay, "weight_decay": 0.0}], lr=self.config.lr)

    # -- the loop ------------------------------------------------------------------------------
    def fit(self, out_dir: str | Path, *, resume: bool = False) -> dict:
        cfg, task, out = self.config, self.task, Path(out_dir)
        torch.manual_seed(cfg.seed + dist.rank())
        random.seed(cfg.seed + dist.rank())
        model = task.model.to(self.device)
        steps_per_epoch = len(self.epoch_batches(0))
        total = cfg.max_steps or cfg.epochs * steps_per_epoch
        opt = self.optimizer = self._optimizer(model)
        clock = {"seconds": 0.0, "start": time.perf_counter()}

        def budget_used() -> float:  # with --max-minutes the schedule also follows the clock
            return (clock["seconds"] + time.perf_counter() - clock["start"]) / (60 * cfg.max_minutes)

        sched = make_scheduler(opt, cfg.schedule, cfg.warmup_steps, total,
                               progress=budget_used if cfg.max_minutes else None)
        step, pos, best, seconds, last_eval = 0, (0, 0), None, 0.0, {}
        log = MetricsLog(out / "metrics.jsonl", enabled=dist.is_main())
        if resume:
            folder, meta = load_meta(out, task=task.name)
            load_weights(folder, model)
            st = load_trainer_state(folder)
            opt.load_state_dict(st["optimizer"])
            sched.load_state_dict(st["scheduler"])
            torch.set_rng_state(st["torch_rng"])
            random.setstate(st["python_rng"])
            step, pos = st["step"], (st["epoch"], st["batch"])
            best, seconds = st.get("best"), st.get("seconds", 0.0)
            last_eval = meta.get("metrics", {})
            log.truncate_after(step)
            if dist.is_main():
                print(f"resumed from {folder} at step {step}")
        elif dist.is_main() and log.path.exists():
            log.path.unlink()
        dmodel = dist.wrap(model)
        dmodel.train()
        self._stop = False
        old_handler = None
        try:
            old_handler = signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main thread
            pass
        bar = _tqdm(total=total, initial=step, desc=f"train {task.name}",
                    disable=not (cfg.progress and dist.is_main()))
        t_start, t_log, items, loss_acc, n_acc = time.perf_counter(), time.perf_counter(), 0, 0.0, 0
        clock.update(seconds=seconds, start=t_start)
        saved_at = step if resume else -1
        budget_hit = False
        try:
            while step < total:
                epoch, first = pos
                batches = self.epoch_batches(epoch)
                for bi in range(first, len(batches)):
                    batch = to_device(task.collate([task.train[i] for i in batches[bi]]), self.device)
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
                        logits, targets, *extra = task.forward(dmodel, batch)
                    loss = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE,
                                           label_smoothing=cfg.label_smoothing)
                    if extra:
                        loss = loss + extra[0].float()
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    if cfg.clip_norm > 0:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
                    opt.step()
                    sched.step()
                    step += 1
                    pos = (epoch, bi + 1) if bi + 1 < len(batches) else (epoch + 1, 0)
                    n = int((targets != IGNORE).sum())
                    items, loss_acc, n_acc = items + n, loss_acc + float(loss.detach()) * n, n_acc + n
                    bar.update(1)
                    now = time.perf_counter()
                    rec = {"step": step, "epoch": epoch, "split": "train", "loss": loss_acc / max(n_acc, 1),
                           "lr": sched.get_last_lr()[0], "items_per_s": items / max(now - t_log, 1e-9)}
                    if step % cfg.log_every == 0 or step == total:
                        log.write(rec)
                        bar.set_postfix(loss=f"{rec['loss']:.4f}", it_s=f"{rec['items_per_s']:.0f}")
                        t_log, items, loss_acc, n_acc = now, 0, 0.0, 0
                    if self.on_step is not None:
                        self.on_step(self, step, rec)
                    over = bool(cfg.max_minutes) and (seconds + now - t_start) > 60 * cfg.max_minutes
                    user = self._stop
                    if dist.world_size() > 1:  # every rank stops at the same step
                        over, user = dist.broadcast_flag(over), dist.broadcast_flag(user)
                    finished = step >= total or over  # the time budget ends a run like its last step
                    due = (cfg.eval_every and step % cfg.eval_every == 0) or \
                        (not cfg.eval_every and pos[1] == 0) or finished
                    if due or user:  # a user stop saves without an extra evaluation: resume stays exact
                        elapsed = seconds + time.perf_counter() - t_start
                        is_best = False
                        if due:
                            last_eval, is_best = self._eval_dev(model, step, epoch, elapsed, log, best)
                        if is_best:
                            best = last_eval.get("accuracy")
                        extra = {"best": best, "seconds": elapsed}
                        self._save(out, dmodel, opt, sched, step, pos, is_best, last_eval, extra,
                                   final=user or finished)
                        saved_at = step
                    if user or finished:
                        budget_hit = over and not user
                        break
                else:
                    continue
                break
        finally:
            bar.close()
            if old_handler is not None:
                signal.signal(signal.SIGINT, old_handler)
        seconds += time.perf_counter() - t_start
        if saved_at != step:  # pragma: no cover - every exit path above saves
            extra = {"best": best, "seconds": seconds}
            self._save(out, dmodel, opt, sched, step, pos, False, last_eval, extra, final=True)
        done = step >= total or budget_hit
        result = {"step": step, "train_seconds": seconds, "dev": last_eval, "interrupted": not done,
                  "time_budget_reached": budget_hit,
                  "params": sum(p.numel() for p in model.parameters())}
        if task.test is not None and done:
            if task.dev is not None and (out / "best.json").exists():
                folder, meta = load_meta(out, which="best")
                load_weights(folder, model)
                result["best_dev"] = meta.get("metrics", {})
            result["test"] = evaluate(task, model, task.test, batch_size=cfg.eval_batch_size, bf16=cfg.bf16,
                                      device=self.device, progress=cfg.progress, desc="test")
            log.write({"step": step, "split": "test", **result["test"]})
        return result

    def _eval_dev(self, model, step, epoch, elapsed, log, best) -> tuple[dict, bool]:
        if self.task.dev is None:
            return {}, False
        m = evaluate(self.task, model, self.task.dev, batch_size=self.config.eval_batch_size,
                     bf16=self.config.bf16, device=self.device, progress=self.config.progress, desc="dev")
        log.write({"step": step, "epoch": epoch, "split": "dev", "seconds": elapsed, **m})
        if dist.is_main() and self.config.progress:
            print(f"step {step}: dev accuracy {m['accuracy']:.4f} loss {m['loss']:.4f}", flush=True)
        return m, best is None or m["accuracy"] > best

    def _on_sigint(self, signum, frame):
        if self._stop:  # second Ctrl-C: give up at once
            raise KeyboardInterrupt
        print("\ninterrupt: finishing this step, saving a checkpoint (Ctrl-C again to abort)", flush=True)
        self._stop = True


def steps_in(n_examples: int, batch_size: int) -> int:
    return math.ceil(n_examples / batch_size)
