"""``attnkit train {tagger,classifier,image,...}``: options built from TrainConfig / TransformerConfig.

Multi-process: ``torchrun --nproc_per_node=2 -m attnkit.cli.main train image --out runs/x``
(gloo on CPU, nccl on GPU); only rank 0 prints, logs and saves.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from pathlib import Path

from ..nn.config import TransformerConfig
from ..outputs import writing
from ..tasks import TASKS, task_module, task_options
from ..tasks.options import add_config_args, config_from_args
from ..tasks.timing import help_text as training_time
from ..train.config import TrainConfig
from ..train.footprint import check_training_memory
from ..train.metrics import floor
from .options import add_progress_option, add_threads_option, set_threads


def add_common(p: argparse.ArgumentParser, mod) -> None:
    """The options every task shares: run folder, device, TrainConfig, and the TransformerConfig fields
    that the task's model reads (``mod.ENCODER_FIELDS`` of its options module; the others are not offered)."""
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="run folder: checkpoints, metrics.jsonl, curves.png, result.json")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    run.add_argument("--overwrite", action="store_true",
                     help="delete the run already in --out and start a new one (without it, a new run refuses a "
                          "folder that holds another run)")
    p.add_argument("--device", default=None,
                   help="torch device: cpu, cuda, cuda:N or mps (default: cuda when available, one GPU per "
                        "torchrun process; else cpu)")
    add_threads_option(p, "on a CPU busy with other jobs 1 can be faster", per_process=True)
    add_progress_option(p)
    add_config_args(p, TrainConfig, defaults=mod.TRAIN_DEFAULTS, title="training")
    add_config_args(p, TransformerConfig, defaults=mod.ENCODER_DEFAULTS, only=mod.ENCODER_FIELDS,
                    title=f"encoder ({mod.ENCODER_NOTE})" if hasattr(mod, "ENCODER_NOTE") else "encoder")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a task model; writes checkpoints, metrics and curves")
    tsub = p.add_subparsers(dest="task", metavar="TASK")
    tsub.required = True
    for name in TASKS:
        mod = task_options(name)  # its options without torch; the task's module is imported by run
        tp = tsub.add_parser(name, help=mod.HELP, description=description(name, mod))
        mod.add_arguments(tp)
        add_common(tp, mod)
        tp.set_defaults(func=run, task_name=name)


def description(name: str, mod) -> str:
    """``train TASK --help``'s description: the task's ``HELP``, then how long its defaults train
    (``attnkit.tasks.timing``), each wrapped (the help keeps a description's line breaks)."""
    return f"{textwrap.fill(mod.HELP, 78)}\n\n{training_time(name, mod.TRAIN_DEFAULTS['epochs'])}"


def run(args: argparse.Namespace) -> int:
    from ..train import distributed as dist
    from ..train.engine import Trainer, refuse_existing_run
    from ..train.lock import run_lock

    mod = task_module(args.task_name)
    set_threads(args)
    device = dist.setup(args.device)
    ok = False
    try:
        train_cfg = config_from_args(TrainConfig, args)
        encoder = config_from_args(TransformerConfig, args)
        check_memory(args, encoder, train_cfg)  # before the task builds or reads anything
        # one writer, also of the task's own files (bpe.json) and of the average made at the end
        with run_lock(args.out, "train", create=not args.resume):
            if not args.resume and not args.overwrite:
                refuse_existing_run(args.out)  # before the task writes anything into it
            task = mod.build(args, encoder, seed=train_cfg.seed)
            result = Trainer(task, train_cfg, device=device).fit(args.out, resume=args.resume,
                                                                 overwrite=args.overwrite)
            if dist.is_main():
                report(args, result)
                for line in (mod.finish(args, task, result) if hasattr(mod, "finish") else []):  # e.g. BLEU
                    print(line, flush=True)
        ok = True
    finally:
        dist.teardown(synchronize=ok)  # all ranks leave together after a normal run
    return 130 if result["interrupted"] else 0


def check_memory(args, encoder: TransformerConfig, train_cfg: TrainConfig) -> None:
    """A one-line error when the run's estimated memory (``attnkit.train.footprint``) is more than the machine
    has: the model from the options (translation: ``--vocab-size`` entries, ``--num-decoder-layers``), one batch
    of ``--batch-tokens`` tokens or ``--batch-size`` sequences of ``--max-length`` (else 128) tokens."""
    seq = getattr(args, "max_length", None) or min(getattr(args, "max_tokens", None) or 128, encoder.max_len)
    stack = encoder.replace(num_decoder_layers=getattr(args, "num_decoder_layers", 0),
                            max_len=max(encoder.max_len, seq))
    check_training_memory(f"train {args.task_name}: this run", stack, vocab=getattr(args, "vocab_size", 0),
                          tokens=train_cfg.batch_tokens or train_cfg.batch_size * seq, seq_len=seq)


def _dev(m: dict, select: str = "accuracy") -> str:
    """Dev metrics in a few words: the one the best checkpoint was chosen by first, e.g. "accuracy: 0.91" or
    "bleu: 24.81 (accuracy 0.6648)"."""
    if select == "accuracy" or select not in m:
        return f"accuracy: {floor(m['accuracy'])}"
    return f"{select}: {m[select]:.2f} (accuracy {floor(m['accuracy'])})"


def summary(result: dict) -> list[str]:
    """The closing lines of a run: how far it got, the best dev score and where things are."""
    out, lines = Path(result["out"]), []
    where = f"at step {result['step']} of {result['total_steps']}"
    if result["interrupted"]:
        lines.append(f"interrupted {where}; continue with: --resume --out {out}")
    elif result["time_budget_reached"]:
        lines.append(f"stopped by the time budget (--max-minutes) {where}; continue with: --resume --out {out}")
    select = result.get("select", "accuracy")
    if result.get("best_dev"):
        best = "best dev" if result.get("pick", "best") == "best" else "dev of the last checkpoint (the run's model)"
        lines.append(f"{best} {_dev(result['best_dev'], select)} at step {result['best_step']}")
    if result.get("dev") and result.get("best_step") != result["step"]:
        lines.append(f"last dev {_dev(result['dev'], select)} at step {result['step']}")
    if result.get("test"):
        lines.append(f"test accuracy: {floor(result['test']['accuracy'])}"
                     + ((" (best dev checkpoint)" if result.get("pick", "best") == "best" else " (last checkpoint)")
                        if result.get("best_dev") else ""))
    if result.get("checkpoint"):
        lines.append(f"checkpoint: {result['checkpoint']}")
    lines.append(f"curves: {out / 'curves.png'}  metrics: {out / 'metrics.jsonl'}")
    return lines


def report(args, result: dict) -> None:
    out = Path(args.out)
    print(f"parameters: {result['params']}  steps: {result['step']}  train time: "
          f"{result['train_seconds']:.1f} s  world size: {int(os.environ.get('WORLD_SIZE', '1'))}")
    print("\n".join(summary(result)))
    with writing(out / "result.json"):
        (out / "result.json").write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
