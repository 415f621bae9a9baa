"""``attnkit train {tagger,classifier,image,...}``: options built from TrainConfig / TransformerConfig.

Multi-process: ``torchrun --nproc_per_node=2 -m attnkit.cli.main train image --out runs/x``
(gloo on CPU, nccl on GPU); only rank 0 prints, logs and saves.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from ..nn import TransformerConfig
from ..tasks import TASKS, task_module
from ..tasks.options import add_config_args, config_from_args
from ..train import TrainConfig, Trainer
from ..train import distributed as dist


def floor(x: float, digits: int = 4) -> str:
    """Format without ever rounding up (0.96999 -> '0.9699')."""
    f = 10 ** digits
    return f"{math.floor(x * f + 1e-9) / f:.{digits}f}"


def add_common(p: argparse.ArgumentParser, mod) -> None:
    """The options every task shares: run folder, device, TrainConfig, and the TransformerConfig fields
    that the task's model reads (``mod.ENCODER_FIELDS``; the others are not offered)."""
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="run folder: checkpoints, metrics.jsonl, curves.png, result.json")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    p.add_argument("--device", default=None,
                   help="torch device: cpu or cuda (default: cuda when available, one GPU per torchrun process; "
                        "else cpu)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per process (0 = torch's default; 1 is fastest for these small models on "
                        "a shared CPU)")
    add_config_args(p, TrainConfig, defaults=mod.TRAIN_DEFAULTS, title="training")
    add_config_args(p, TransformerConfig, defaults=mod.ENCODER_DEFAULTS, only=mod.ENCODER_FIELDS,
                    title=f"encoder ({mod.ENCODER_NOTE})" if hasattr(mod, "ENCODER_NOTE") else "encoder")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a task model; writes checkpoints, metrics and curves")
    tsub = p.add_subparsers(dest="task", metavar="TASK")
    tsub.required = True
    for name in TASKS:
        mod = task_module(name)
        tp = tsub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(tp)
        add_common(tp, mod)
        tp.set_defaults(func=run, task_name=name)


def run(args: argparse.Namespace) -> int:
    import torch

    mod = task_module(args.task_name)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = dist.setup(args.device)
    ok = False
    try:
        train_cfg = config_from_args(TrainConfig, args)
        encoder = config_from_args(TransformerConfig, args)
        task = mod.build(args, encoder, seed=train_cfg.seed)
        result = Trainer(task, train_cfg, device=device).fit(args.out, resume=args.resume)
        if dist.is_main():
            report(args, result)
        ok = True
    finally:
        dist.teardown(synchronize=ok)  # all ranks leave together after a normal run
    return 130 if result["interrupted"] else 0


def report(args, result: dict) -> None:
    out = Path(args.out)
    print(f"parameters: {result['params']}  steps: {result['step']}  train time: "
          f"{result['train_seconds']:.1f} s  world size: {int(os.environ.get('WORLD_SIZE', '1'))}")
    if result["interrupted"]:
        print(f"stopped early; continue with: --resume --out {out}")
    for key, name in (("dev", "last dev"), ("best_dev", "best dev"), ("test", "test")):
        if result.get(key):
            print(f"{name} accuracy: {floor(result[key]['accuracy'])}")
    (out / "result.json").write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"checkpoint, metrics.jsonl and curves.png in {out}")
