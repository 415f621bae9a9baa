"""``attnkit evaluate CHECKPOINT --data PATH``: accuracy of a trained model on a data file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..tasks import TASKS, task_module
from ..train import evaluate
from ..train.checkpoint import CheckpointError, load_meta
from .decoding import add_decoding_args, generate_kwargs
from .train import floor


def open_checkpoint(path: Path, which: str = "best"):
    folder, meta = load_meta(path, which=which)
    if meta.get("task") not in TASKS:
        raise CheckpointError(f"checkpoint: {folder} is for task {meta.get('task')!r}, which this attnkit does "
                              f"not know (known: {sorted(TASKS)})")
    mod = task_module(meta["task"])
    return folder, meta, mod, mod.load(folder, meta)


def run(args) -> int:
    folder, meta, mod, model = open_checkpoint(args.checkpoint, args.which)
    if hasattr(mod, "score"):  # tasks with their own metric (translation: BLEU and chrF of decoded text)
        print(f"checkpoint: {folder} (task {meta['task']}, step {meta.get('step')})")
        for line in mod.score(model, meta, args, generate_kwargs(args, meta.get("decoder", "ar"))):
            print(line)
        return 0
    data = mod.evaluation_data(meta, args.data, args)
    res = evaluate(mod.task_for(model, meta), model, data, batch_size=args.batch_size, progress=True)
    print(f"checkpoint: {folder} (task {meta['task']}, step {meta.get('step')})")
    print(f"examples scored: {res['count']}  loss: {res['loss']:.4f}")
    print(f"accuracy: {floor(res['accuracy'])}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score a checkpoint on a data file")
    p.add_argument("checkpoint", type=Path, help="a run folder (its best checkpoint) or a ckpt-* folder")
    p.add_argument("--data", default=None, help="data file (CoNLL-U, TSV) or, for images, test / dev / a folder")
    p.add_argument("--which", choices=("best", "latest"), default="best")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--field", choices=("upos", "xpos"), default=None, help="tagger: overrides the trained field")
    p.add_argument("--ref", default=None, help="translation: reference translations of --data FILE, one per line "
                                               "(without it --data names a Multi30k split: test, val, train)")
    add_decoding_args(p, beam=5)
    p.set_defaults(func=run)
