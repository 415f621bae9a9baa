"""The training engine: a plain PyTorch loop any task plugs into.

How a task plugs in: build a ``Task`` with

- ``name``: a string stored in the checkpoint (``evaluate`` / ``predict`` refuse another task's checkpoint);
- ``model``: an ``nn.Module``;
- ``train`` (and optionally ``dev``, ``test``): sequences of examples, any Python objects;
- ``collate(examples) -> batch``: tensors, in a dict / tuple / list (moved to the device for you);
- ``forward(model, batch) -> (logits (N, C), targets (N,))``: the engine takes cross-entropy
  (with label smoothing) and counts accuracy; targets equal to ``IGNORE`` (-100) are skipped, which
  covers padding, non-first subwords and unlabelled graph nodes. Further items, scalar losses, are added to
  the training loss (the graph task's edge loss; speech's CTC loss and speaker adversary); evaluation ignores them;
- ``meta``: a JSON-able dict (model config, vocabulary, label set) saved next to the weights;
- ``lengths`` (optional): one size per train example; batches are then bucketed by length, and with
  ``TrainConfig.batch_tokens`` filled up to a token budget (padded size: examples x longest) instead
  of a fixed number of examples;
- ``augment(examples, indices, epoch) -> examples`` (optional): a step's examples changed before ``collate``, drawing
  only from (the task's seed, ``epoch``, each index in ``train``), never a global generator: a resumed run draws alike;
- ``score(model) -> {name: value}`` (optional): dev metrics measured on the model itself after the
  loss and accuracy (e.g. the BLEU of its translations), and ``select``: the dev metric, higher is
  better, that picks the best checkpoint (default ``"accuracy"``).

Then ``Trainer(task, TrainConfig(...)).fit(out_dir, resume=..., overwrite=...)``. ``fit`` reads as
its steps: set up (seeds, optimiser, schedule; ``resume`` or start fresh), then per batch
``train_step``, ``maybe_evaluate`` and ``save`` when due, then ``finish`` (test set, result). The
engine gives AdamW, warm-up then decay by steps (``attnkit.train.schedule``), gradient clipping,
label smoothing, seeds, optional bfloat16 autocast on the model's device, progress bars on a
terminal and plain lines in a log (``attnkit.train.progress``), ``metrics.jsonl`` + ``curves.png``,
atomic checksummed checkpoints without pickle (``attnkit.train.checkpoint``), ``--resume`` with
optimiser / scheduler / RNG state (the same numbers as an uninterrupted run, also after a stop by
``max_minutes``), Ctrl-C = save and stop, and DistributedDataParallel when launched by torchrun
(``attnkit.train.distributed``).
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..outputs import writing
from . import checkpoint as ckpt
from . import distributed as dist
from .batches import epoch_batches
from .config import TrainConfig
from .evaluation import autocast, evaluate, to_device
from .lock import run_lock
from .metrics import IGNORE, MetricsLog, floor, plot_curves
from .progress import Progress, bars_wanted
from .schedule import make_scheduler, warmup_note
from .state import RunState, rng_state, seed_everything, set_rng_state

__all__ = ["TrainConfig", "Task", "Trainer", "TrainingDiverged", "evaluate", "to_device", "steps_in"]


class TrainingDiverged(ValueError):
    """The training loss (or the weights) became NaN or infinite; nothing after the last checkpoint was saved."""


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
    score: Callable[[nn.Module], dict[str, float]] | None = None
    select: str = "accuracy"
    augment: Callable[[list, list[int], int], list] | None = None


class Trainer:
    """Runs ``task`` with ``config``; ``fit(out_dir, resume=, overwrite=)`` returns the final metrics.

    ``on_step(trainer, step, record)`` (optional) runs after every optimiser step. ``clock`` gives
    seconds (tests replace it to stop a run by its time budget at a chosen step).
    """

    def __init__(self, task: Task, config: TrainConfig, *, device: torch.device | str = "cpu",
                 on_step: Callable[[Trainer, int, dict], None] | None = None):
        if len(task.train) == 0:
            raise ValueError(f"Trainer: the training set of task {task.name!r} is empty")
        if task.lengths is not None and len(task.lengths) != len(task.train):
            raise ValueError(f"Trainer: `lengths` has {len(task.lengths)} entries, train {len(task.train)}")
        if task.select != "accuracy" and task.score is None:
            raise ValueError(f"Trainer: task {task.name!r} selects the best checkpoint by {task.select!r} but has no "
                             "`score` to measure it (only accuracy comes without one)")
        self.task, self.config, self.device, self.on_step = task, config, torch.device(device), on_step
        self.clock: Callable[[], float] = time.perf_counter
        self.state = RunState()
        self.progress: Progress | None = None
        self._stop = False
        self._plotted = -1e9
        self._new_best = False

    def request_stop(self) -> None:
        """Finish the current step, save a checkpoint, return (what Ctrl-C does)."""
        self._stop = True

    # -- batches -------------------------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """This process's batches (lists of train indices) for ``epoch``; depends on seed and epoch only."""
        cfg = self.config
        return epoch_batches(len(self.task.train), self.task.lengths, batch_size=cfg.batch_size,
                             batch_tokens=cfg.batch_tokens, seed=cfg.seed, epoch=epoch, world=dist.world_size(),
                             rank=dist.rank())

    # -- fit, step by step ---------------------------------------------------------------------
    def fit(self, out_dir: str | Path, *, resume: bool = False, overwrite: bool = False) -> dict:
        """Train for ``total`` steps (or until stopped), evaluating and saving on the way.

        ``resume``: continue the run in ``out_dir``; otherwise ``out_dir`` must not hold another
        run unless ``overwrite`` (which deletes it). The run folder is locked meanwhile (``attnkit.train.lock``):
        a second writer is refused. A loss that becomes NaN or inf stops the run (``TrainingDiverged``)
        before anything of that step is logged or saved.
        """
        with run_lock(out_dir, "train", create=not resume):
            notes = self._setup(Path(out_dir), resume, overwrite)
            with self._catch_sigint(), Progress(self.total, self.state.step, f"train {self.task.name}",
                                                bars=self.bars, enabled=dist.is_main()) as self.progress:
                for line in notes:
                    self.progress.write(line)
                stop = self._loop()
            return self.finish(stop)

    def _setup(self, out: Path, resume: bool, overwrite: bool) -> list[str]:
        """Seeds, model on its device, optimiser, schedule, log; then resume or start fresh."""
        cfg = self.config
        self.out = out
        seed_everything(cfg.seed + dist.rank())
        self.model = self.task.model.to(self.device)
        self.total = cfg.max_steps or cfg.epochs * len(self.epoch_batches(0))
        self.optimizer = self._optimizer(self.model)
        self.scheduler = make_scheduler(self.optimizer, cfg.schedule, cfg.warmup_steps, self.total)
        self.log = MetricsLog(out / "metrics.jsonl", enabled=dist.is_main())
        self.bars = bars_wanted(cfg.progress) and dist.is_main()
        notes = self.resume() if resume else self._start_fresh(overwrite)
        notes += [n for n in [warmup_note(cfg.schedule, cfg.warmup_steps, self.total)] if n]
        self.dmodel = dist.wrap(self.model)
        self.dmodel.train()
        return notes

    def _start_fresh(self, overwrite: bool) -> list[str]:
        found = ckpt.existing_run(self.out)
        if not overwrite:
            refuse_existing_run(self.out)
        dist.barrier()  # every rank has looked before rank 0 deletes anything
        if found and dist.is_main():
            ckpt.clear_run(self.out)
        self.state = RunState()
        return [f"deleted the previous run in {self.out} (--overwrite)"] if found else []

    def resume(self) -> list[str]:
        """Continue from the latest checkpoint in ``out``: weights, optimiser, schedule, RNG, position."""
        folder, _ = ckpt.load_meta(self.out, task=self.task.name)
        ckpt.load_weights(folder, self.model)
        st = ckpt.load_trainer_state(folder)
        try:
            self.optimizer.load_state_dict(st["optimizer"])
            self.scheduler.load_state_dict(st["scheduler"])
            self.state = RunState(**st["run"])
            rng, saved_world = st["rng"], st["world_size"]
        except (KeyError, TypeError, ValueError) as e:
            raise ckpt.CheckpointError(f"checkpoint: {folder / ckpt.STATE_JSON} does not fit this run ({e})") \
                from None
        notes = [f"resumed from {folder} at step {self.state.step}"]
        if self.state.best is not None and self.state.best_metric != self.task.select:
            notes.append(f"the best checkpoint so far was chosen by dev {self.state.best_metric}; from now on by "
                         f"dev {self.task.select} (the next evaluation starts the comparison)")
            self.state.best = None  # best.json keeps pointing at the old best until then
        if saved_world == dist.world_size():
            notes += set_rng_state(rng[dist.rank()], self.device)
        else:
            seed_everything(self.config.seed + dist.rank() + 1_000_003 * self.state.step)
            notes.append(f"the run was saved by {saved_world} process(es), resumed by {dist.world_size()}: "
                         f"batches and random draws differ from an uninterrupted run")
        if dist.is_main():
            ckpt.clean_leftovers(self.out)
            ckpt.point_best(self.out, self.state.best_step)
        with writing(self.log.path):
            self.log.truncate_after(self.state.step)
        return notes

    def _loop(self) -> str | None:
        """Steps until the last one; returns why it ended early: "user" (Ctrl-C), "time", or None."""
        s = self.state
        self._started, seconds_before = self.clock(), s.seconds
        self._window_start, epoch, batches = self._started, None, []
        while s.step < self.total:
            if epoch != s.epoch:
                epoch, batches = s.epoch, self.epoch_batches(s.epoch)
            if s.batch >= len(batches):  # resumed with a larger batch size: this epoch is done
                s.epoch, s.batch = s.epoch + 1, 0
                continue
            loss, n = self.train_step(batches[s.batch])
            self._check_finite(loss)
            s.advance(len(batches))
            s.seconds = seconds_before + self.clock() - self._started
            rec = self._record(epoch, loss, n)
            if self.on_step is not None:
                self.on_step(self, s.step, rec)
            stop, paused = self._stop_reason(), self.clock()
            if self.maybe_evaluate() or stop:  # a stop saves without an extra evaluation: resume stays exact
                self.save(final=bool(stop) or s.step >= self.total)
            self._window_start += self.clock() - paused  # the rate counts training time only
            if stop:
                return stop
        return None

    def _record(self, epoch: int, loss: float, n: int) -> dict:
        """The step's train record: mean loss and items/s since the last logged step. Every
        ``log_every`` steps (and at the last) it goes to metrics.jsonl and the progress display."""
        s, now = self.state, self.clock()
        s.window_loss, s.window_items = s.window_loss + loss * n, s.window_items + n
        rec = {"step": s.step, "epoch": epoch, "split": "train", "loss": s.window_loss / max(s.window_items, 1),
               "lr": self.scheduler.get_last_lr()[0],
               "items_per_s": s.window_items / max(now - self._window_start, 1e-9)}
        logged = s.step % self.config.log_every == 0 or s.step == self.total
        if logged:
            self._log(rec)
            s.window_loss, s.window_items, self._window_start = 0.0, 0, now
        self.progress.step(s.step, rec if logged else None)
        return rec

    def train_step(self, indices: list[int]) -> tuple[float, int]:
        """One optimiser step on the train examples ``indices``: (loss, number of scored targets)."""
        cfg, task = self.config, self.task
        examples = [task.train[i] for i in indices]
        if task.augment is not None:
            examples = task.augment(examples, list(indices), self.state.epoch)
        batch = to_device(task.collate(examples), self.device)
        with autocast(self.device, cfg.bf16):
            logits, targets, *extra = task.forward(self.dmodel, batch)
        loss = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE, label_smoothing=cfg.label_smoothing)
        for term in extra:  # every further item a scalar loss, added
            loss = loss + term.float()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        # one device sync for both numbers (float64 holds the float32 loss and the count exactly)
        loss_value, n = torch.stack((loss.detach().double(), (targets != IGNORE).sum().double())).tolist()
        return loss_value, int(n)

    def _check_finite(self, loss: float) -> None:
        """TrainingDiverged if the step's loss is NaN or inf (on any rank: all ranks stop at the same step).
        ``loss`` is already a Python number: the check costs no device sync."""
        bad = not math.isfinite(loss)
        if dist.world_size() > 1:
            bad = dist.any_flag(bad)
        if bad:
            self._diverged(f"the training loss is {loss} at step {self.state.step + 1}"
                           if not math.isfinite(loss) else f"the training loss of another rank is not finite "
                           f"at step {self.state.step + 1}")

    def _diverged(self, what: str) -> None:
        last = ckpt._pointer(self.out, "latest")
        kept = f"the last checkpoint, {self.out / last}, is kept" if last else "no checkpoint was written"
        raise TrainingDiverged(f"train: {what}; stopped without saving it ({kept}). Lower --lr, or raise "
                               f"--warmup-steps, or set --clip-norm")

    def _stop_reason(self) -> str | None:
        over = self.config.max_minutes > 0 and self.clock() - self._started > 60 * self.config.max_minutes
        user = self._stop
        if dist.world_size() > 1:  # every rank stops at the same step
            over, user = dist.broadcast_flag(over), dist.broadcast_flag(user)
        return "user" if user else "time" if over and self.state.step < self.total else None

    def maybe_evaluate(self) -> bool:
        """Score dev when due (every ``eval_every`` steps, else at each epoch's end, and at the last
        step) and track the best; True when due (a checkpoint follows)."""
        cfg, s = self.config, self.state
        due = s.step >= self.total or (s.step % cfg.eval_every == 0 if cfg.eval_every else s.at_epoch_end)
        if not due or self.task.dev is None:
            return due
        m = evaluate(self.task, self.model, self.task.dev, batch_size=cfg.eval_batch_size, bf16=cfg.bf16,
                     device=self.device, progress=self.bars, desc="dev")
        extra = self.task.score(self.model) if self.task.score is not None else {}
        m = {**m, **extra}
        self._log({"step": s.step, "epoch": s.epoch - s.at_epoch_end, "split": "dev", "seconds": s.seconds, **m})
        if self.task.select not in m:
            raise ValueError(f"Trainer: task {self.task.name!r} selects the best checkpoint by "
                             f"{self.task.select!r}, a dev metric it does not measure ({', '.join(m)})")
        better = s.best is None or m[self.task.select] > s.best
        s.dev, self._new_best = m, better if cfg.pick == "best" else s.step >= self.total
        if self._new_best:
            s.best, s.best_step, s.best_metric = m[self.task.select], s.step, self.task.select
        shown = "".join(f"  {k} {v:.2f}" for k, v in extra.items())
        mark = ("  (best so far)" if cfg.pick == "best" else "  (the run's model: the last step)") * self._new_best
        self.progress.write(f"step {s.step}/{self.total}  dev accuracy {floor(m['accuracy'])}  loss {m['loss']:.4f}"
                            + shown + mark)
        return True

    def save(self, final: bool = False) -> None:
        """A checkpoint of weights, optimiser, schedule, every rank's RNG and the run state; rank 0 writes.
        Weights that are not finite are never saved (every rank holds the same weights: all stop together)."""
        finite = [torch.isfinite(p).all() for p in self.model.parameters()]
        if finite and not bool(torch.stack(finite).all()):  # one device sync per checkpoint
            self._diverged(f"the weights are not finite (NaN or inf) after step {self.state.step}")
        rngs = dist.gather_rng(rng_state(self.device))
        if dist.is_main():
            state = {"run": asdict(self.state), "optimizer": self.optimizer.state_dict(),
                     "scheduler": self.scheduler.state_dict(), "rng": rngs, "world_size": dist.world_size()}
            ckpt.save_checkpoint(self.out, dist.unwrap(self.dmodel), self._meta(), step=self.state.step,
                                 trainer_state=state, best=self._new_best, keep=self.config.keep)
            now = time.perf_counter()
            if final or now - self._plotted > 60:  # matplotlib is slow: at most once a minute, and at the end
                with writing(self.out / "curves.png"):
                    plot_curves(self.out / "metrics.jsonl", self.out / "curves.png", title=self.task.name)
                self._plotted = now
        self._new_best = False
        dist.barrier()

    def finish(self, stop: str | None) -> dict:
        """The result; unless the user stopped the run, the test set scored with the run's model (best.json:
        the best dev checkpoint, or the last with ``pick="last"``)."""
        s, task, cfg = self.state, self.task, self.config
        result = {"step": s.step, "total_steps": self.total, "train_seconds": s.seconds, "dev": s.dev,
                  "interrupted": stop == "user", "time_budget_reached": stop == "time",
                  "complete": s.step >= self.total, "out": str(self.out),
                  "params": sum(p.numel() for p in self.model.parameters())}
        best = ckpt.load_meta(self.out, which="best") if (self.out / "best.json").exists() else None
        if best is not None:
            result["best_dev"], result["best_step"] = best[1].get("metrics", {}), best[1]["step"]
            result["select"], result["pick"] = task.select, cfg.pick
        if ckpt.existing_run(self.out):
            result["checkpoint"] = str(ckpt.resolve(self.out, "best"))
        if task.test is None or stop == "user":
            return result
        if best is not None:
            ckpt.load_weights(best[0], self.model)
        result["test"] = evaluate(task, self.model, task.test, batch_size=cfg.eval_batch_size, bf16=cfg.bf16,
                                  device=self.device, progress=self.bars, desc="test")
        self._log({"step": s.step, "split": "test", **result["test"]})
        return result

    # -- helpers -------------------------------------------------------------------------------
    def _log(self, record: dict) -> None:
        with writing(self.log.path):  # a full disk is one line naming metrics.jsonl
            self.log.write(record)

    def _meta(self) -> dict:
        return {**self.task.meta, "task": self.task.name, "train_config": asdict(self.config),
                "metrics": self.state.dev}

    def _optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": self.config.weight_decay},
                                  {"params": no_decay, "weight_decay": 0.0}], lr=self.config.lr)

    @contextlib.contextmanager
    def _catch_sigint(self):
        """Ctrl-C finishes the step, saves and stops (a second Ctrl-C aborts); the old handler comes back."""
        self._stop = False
        try:
            old = signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main thread
            old = None
        try:
            yield
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)

    def _on_sigint(self, signum, frame):
        if self._stop:  # second Ctrl-C: give up at once
            raise KeyboardInterrupt
        line = "interrupt: finishing this step, saving a checkpoint (Ctrl-C again to abort)"
        self.progress.write(line) if self.progress is not None else print(line, flush=True)
        self._stop = True


def refuse_existing_run(out: str | Path) -> None:
    """A ValueError if ``out`` holds a run: a new run never writes into another run's folder."""
    found = ckpt.existing_run(out)
    if found:
        raise ValueError(f"train: {out} already holds a run ({found}); continue it with --resume, "
                         f"or start over with --overwrite (deletes it)")


def steps_in(n_examples: int, batch_size: int) -> int:
    return math.ceil(n_examples / batch_size)
