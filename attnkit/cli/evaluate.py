"""``attnkit evaluate RUN [--data DATA]``: accuracy of a trained model on a data file or a split.

Without ``--data`` each task scores its standard split (see ``EVALUATION_DATA`` of each task's options module).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..inference.dtypes import DTYPES
from ..nn.limits import floats, ints
from ..tasks import TASKS, task_module, task_options
from ..tasks.options import add_data_args
from ..train.checkpoint import CheckpointError, load_meta
from ..train.metrics import floor
from .decoding import add_decoding_args, generate_kwargs
from .options import add_dtype_option, add_threads_option, set_threads


def open_checkpoint(path: Path, which: str = "best", options: dict | None = None):
    """(folder, meta, task module, model) of a run; ``options`` go to the task's ``load`` (translation:
    ``dtype``)."""
    folder, meta = load_meta(path, which=which)
    if meta.get("task") not in TASKS:
        raise CheckpointError(f"checkpoint: {folder} is for task {meta.get('task')!r}, which this attnkit does "
                              f"not know (known: {sorted(TASKS)})")
    mod = task_module(meta["task"])
    try:
        model = mod.load(folder, meta, **(options or {}))
    except (KeyError, TypeError, AttributeError) as e:  # meta.json without what this task's model needs
        raise CheckpointError(f"checkpoint: {folder / 'meta.json'} lacks or has an invalid entry for the "
                              f"{meta['task']} model ({type(e).__name__}: {e})") from None
    return folder, meta, mod, model


def run(args) -> int:
    set_threads(args)
    options = None
    if args.dtype != "float32":  # translation runs only: the weights' dtype
        task = load_meta(args.checkpoint, which=args.which)[1].get("task")
        if task != "translate":
            raise ValueError(f"evaluate: --dtype {args.dtype} applies to translation runs; {args.checkpoint} is a "
                             f"{task} run")
        options = {"dtype": DTYPES[args.dtype]}
    folder, meta, mod, model = open_checkpoint(args.checkpoint, args.which, options)
    if hasattr(mod, "score"):  # tasks with their own metric (translation: BLEU and chrF of decoded text)
        print(f"checkpoint: {folder} (task {meta['task']}, step {meta.get('step')})")
        for line in mod.score(model, meta, args, generate_kwargs(args, meta.get("decoder", "ar"), "evaluate")):
            print(line)
        return 0
    from ..train import evaluate

    data = mod.evaluation_data(meta, args.data, args)
    res = evaluate(mod.task_for(model, meta, args), model, data, batch_size=args.batch_size,
                   progress=show_progress(args))  # a bar on a terminal, plain lines in a piped log
    print(f"checkpoint: {folder} (task {meta['task']}, step {meta.get('step')})")
    print(f"examples scored: {res['count']}  loss: {res['loss']:.4f}")
    print(f"accuracy: {floor(res['accuracy'])}")
    return 0


def show_progress(args) -> bool:
    """--progress / --no-progress, else a bar only when stderr is a terminal."""
    return sys.stderr.isatty() if getattr(args, "progress", None) is None else args.progress


def add_checkpoint_args(p: argparse.ArgumentParser) -> None:
    """The run folder, which of its checkpoints, and where its dataset is (for ``evaluate`` and ``predict``)."""
    p.add_argument("checkpoint", type=Path, metavar="RUN",
                   help="a run folder (its best or latest checkpoint, see --which) or one ckpt-* folder")
    p.add_argument("--which", choices=("best", "latest"), default="best",
                   help="in a run folder: the checkpoint with the best dev score, or the last one saved")
    add_data_args(p, "the run's dataset (ud_english_ewt/, sst2/, mnist/, fsdd/ or planetoid/)",
                  "fetch the run's dataset into the cache if it is missing")


def add_parser(sub: argparse._SubParsersAction) -> None:
    per_task = "; ".join(task_options(name).EVALUATION_DATA for name in TASKS)
    p = sub.add_parser("evaluate", help="score a checkpoint on a data file or a split of its dataset",
                       description="Score a checkpoint. Without --data each task scores its standard split.")
    add_checkpoint_args(p)
    p.add_argument("--data", default=None, help=f"what to score, by the run's task: {per_task}")
    p.add_argument("--batch-size", type=ints(1, 2**20), default=64, help="examples per batch")
    p.add_argument("--field", choices=("upos", "xpos"), default=None,
                   help="tagger: the tag column to score (default: the one the run was trained on)")
    p.add_argument("--ref", default=None, help="translation: reference translations of --data FILE, one per line "
                                               "(default: none, --data names a Multi30k split: test, val, train)")
    p.add_argument("--ctc-weight", type=floats(0, 1), default=None, metavar="W",
                   help="asr: the weight of CTC's prefix score in the beam + CTC decoding (default: the run's)")
    add_dtype_option(p, "translation: the weights' dtype")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a progress bar counting the examples (translation: the texts translated) scored (default: "
                        "only when stderr is a terminal; otherwise a plain line at least every 10 s)")
    add_decoding_args(p, beam=5)
    add_threads_option(p)
    p.set_defaults(func=run)
