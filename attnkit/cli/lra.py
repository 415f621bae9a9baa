"""``attnkit lra ...``: LRA-lite, the efficient-attention variants on long-sequence tasks.

    attnkit lra generate listops --out DIR --seed S [--max-length N] [--n N]   # LRA's ListOps TSVs
    attnkit lra generate pathfinder --out DIR --seed S [--n N]                  # Pathfinder .npz
    attnkit lra generate mqar --out DIR --seed S [--seq-len N] [--num-pairs N]  # associative recall .npz
    attnkit lra run [--quick] [--out runs/lra]        # every task x variant x seed; tables, figures; resumable
    attnkit lra cell --task mqar --variant performer --seed 0 --out DIR         # one cell
    attnkit lra report runs/lra                       # rewrite results.md and lra.png
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from pathlib import Path

from ..data.listops import COUNT, ListOpsConfig, generate_listops, write_listops
from ..data.mqar import MQARConfig, generate_mqar, write_mqar
from ..data.pathfinder import PathfinderConfig, generate_pathfinder, write_pathfinder
from ..lra.settings import SUITES, TASKS, VARIANT_NAMES
from ..nn.limits import SEED, ints
from ..outputs import out_folder, writing
from ..tasks.options import add_config_args, config_from_args
from .options import THREADS, out_path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lra", help="LRA-lite: efficient attention variants x long-sequence tasks",
                       description=__doc__)
    lsub = p.add_subparsers(dest="lra_command", metavar="ACTION")
    lsub.required = True

    g = lsub.add_parser("generate", help="write a generated dataset (listops, pathfinder, mqar)")
    gsub = g.add_subparsers(dest="dataset", metavar="DATASET")
    gsub.required = True
    lo = gsub.add_parser("listops", help="ListOps with LRA's recipe: basic_{train,val,test}.tsv (Source, Target)")
    lo.add_argument("--out", type=out_path, required=True, help="folder for the three TSV files")
    lo.add_argument("--n", dest="n_train", type=COUNT, default=argparse.SUPPRESS,
                    help="training examples, the same as --n-train (default: --n-train's)")
    lo.add_argument("--min-length", type=ints(0, 10**6), default=None,
                    help="exclusive lower bound on the tokens (default max_length / 4: LRA's 500 for 2000)")
    add_config_args(lo, ListOpsConfig, title="ListOps (LRA's defaults)",
                    only=("max_depth", "max_args", "max_length", "n_train", "n_val", "n_test", "seed"))
    lo.set_defaults(func=run_generate_listops)
    pf = gsub.add_parser("pathfinder", help="Pathfinder images: pathfinder_{train,val,test}.npz")
    pf.add_argument("--out", type=out_path, required=True, help="folder for the three .npz files")
    pf.add_argument("--n", dest="n_train", type=COUNT, default=argparse.SUPPRESS,
                    help="training images, the same as --n-train (default: --n-train's)")
    add_config_args(pf, PathfinderConfig, title="Pathfinder")
    pf.set_defaults(func=run_generate_pathfinder)
    mq = gsub.add_parser("mqar", help="multi-query associative recall (Zoology's MQAR): mqar_{train,val,test}.npz")
    mq.add_argument("--out", type=out_path, required=True, help="folder for the three .npz files")
    add_config_args(mq, MQARConfig, title="MQAR")
    mq.set_defaults(func=run_generate_mqar)

    r = lsub.add_parser("run", help="run every variant x task cell (skips cells already done), then table + figure")
    r.add_argument("--out", type=out_path, default=Path("runs/lra"), help="run folder (default runs/lra)")
    r.add_argument("--quick", action="store_true", help="tiny sizes: a few minutes (what the tests use)")
    r.add_argument("--tasks", nargs="+", choices=TASKS, default=None,
                   help="default: all of the suite (text only with IMDb)")
    r.add_argument("--variants", nargs="+", choices=VARIANT_NAMES, default=None, help="default: all")
    r.add_argument("--seeds", nargs="+", type=SEED, default=None,
                   help="seeds of the data generators and of the cells' training (default 0 1 2; --quick: 0)")
    _data_args(r)
    r.set_defaults(func=run_suite_cmd)

    c = lsub.add_parser("cell", help="train and measure one variant on one task (one row of the table)")
    c.add_argument("--task", choices=TASKS, required=True, help="the task (a name of the suite's table)")
    c.add_argument("--variant", choices=VARIANT_NAMES, required=True, help="the attention variant")
    c.add_argument("--suite", choices=sorted(SUITES), default="full", help="the sizes: full (the benchmark) or quick")
    c.add_argument("--seed", type=SEED, default=0, help="seed of the data generators and of the training")
    c.add_argument("--out", type=out_path, required=True, help="the cell's run folder (checkpoints, metrics)")
    c.add_argument("--results", type=out_path, default=None,
                   help="append the result row to this results.jsonl (default: only <out>/cell.json)")
    c.add_argument("--resume", action="store_true", help="continue the cell from its last checkpoint")
    c.add_argument("--progress", action="store_true", help="show progress bars")
    _data_args(c)
    c.set_defaults(func=run_cell_cmd)

    rep = lsub.add_parser("report", help="rewrite results.md and lra.png of a run folder")
    rep.add_argument("folder", type=Path, help="a run folder of `attnkit lra run` (holding results.jsonl)")
    rep.set_defaults(func=run_report)


def _data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, default=None, help="generated data (default <out>/data)")
    p.add_argument("--mnist-dir", type=Path, default=None, help="MNIST IDX files (default <data root>/mnist)")
    p.add_argument("--imdb-dir", type=Path, default=None, help="folder holding aclImdb/ (default <data root>/imdb)")
    p.add_argument("--download", action="store_true", help="text: fetch IMDb (84 MB) if missing")
    p.add_argument("--threads", type=THREADS, default=None, help="torch threads (0 or default: torch's choice)")


def _generate(what: str, cfg, generate, write, out: Path, detail: str) -> int:
    out = out_folder(out, "lra generate: --out")  # before generating
    t0 = time.perf_counter()
    with writing(out):  # a full disk names the folder when the OS names no file
        paths = write(generate(cfg), out)
    print(f"wrote {cfg.n_train:,} / {cfg.n_val:,} / {cfg.n_test:,} {what} ({detail}, seed {cfg.seed}) in "
          f"{time.perf_counter() - t0:.0f} s:")
    for path in paths:
        print(f"  {path}")
    return 0


def run_generate_listops(args) -> int:
    if args.min_length is None:
        args.min_length = args.max_length // 4
    cfg = config_from_args(ListOpsConfig, args)
    return _generate("expressions", cfg, generate_listops, write_listops, args.out,
                     f"{cfg.min_length} < length < {cfg.max_length}")


def run_generate_pathfinder(args) -> int:
    cfg = config_from_args(PathfinderConfig, args)
    return _generate("images", cfg, generate_pathfinder, write_pathfinder, args.out, f"{cfg.size}x{cfg.size}")


def run_generate_mqar(args) -> int:
    cfg = config_from_args(MQARConfig, args)
    return _generate("sequences", cfg, generate_mqar, write_mqar, args.out,
                     f"{cfg.num_pairs} pairs in {cfg.seq_len} tokens, {cfg.num_keys} keys, {cfg.num_values} values")


def _threads(args) -> None:
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)


def run_suite_cmd(args) -> int:
    from ..lra.report import accuracy_table
    from ..lra.suite import run_suite

    _threads(args)
    rows = run_suite(args.out, suite="quick" if args.quick else "full", tasks=args.tasks, variants=args.variants,
                     seeds=args.seeds, data_dir=args.data_dir, mnist_dir=args.mnist_dir, imdb_dir=args.imdb_dir,
                     download=args.download, threads=args.threads)
    if rows:
        print(accuracy_table(rows, _floors(args.out)))
    print(f"tables in {args.out / 'results.md'}, figures {args.out / 'lra.png'} and {args.out / 'lra_curves.png'}, "
          f"rows in {args.out / 'results.jsonl'}")
    return 0


def run_cell_cmd(args) -> int:
    from ..lra.cell import run_cell
    from ..lra.settings import suite_settings
    from ..lra.suite import append_result, cell_command
    from ..lra.tasks import prepare_task

    _threads(args)
    if args.results is not None:  # before the work: a folder or a read-only file is refused now, not after training
        with writing(args.results), open(args.results, "a", encoding="utf-8"):
            pass
    s = suite_settings(args.suite, args.task)
    data_dir = args.data_dir or args.out / "data"
    data = prepare_task(s, data_dir, args.seed, mnist_dir=args.mnist_dir, imdb_dir=args.imdb_dir,
                        download=args.download)
    row = run_cell(args.task, args.variant, s, data, args.out, seed=args.seed, progress=args.progress,
                   resume=args.resume)
    cmd = cell_command(args.task, args.variant, args.suite, args.seed, args.out, data_dir, args.results,
                       args.mnist_dir, args.imdb_dir, args.threads)
    row = {**row, "label": s.label or args.task, "suite": args.suite, "command": shlex.join(cmd)}
    (Path(args.out) / "cell.json").write_text(json.dumps(row, indent=1) + "\n", encoding="utf-8")
    if args.results is not None:
        append_result(args.results, row)
    acc = row["test_accuracy"]
    mem = "n/a" if row["peak_mb"] is None else f"{row['peak_mb']:.0f} MB"
    print(f"{args.task} x {args.variant}: test accuracy {'-' if acc is None else f'{100 * acc:.2f}'}%, "
          f"{row['steps_per_s']:.3f} steps/s, peak {mem} per step, {row['train_seconds']:.0f} s of training"
          + (f" ({row['pretrain']['seconds']:.0f} s self-pretraining)" if "pretrain" in row else ""))
    if row.get("by_depth"):
        print("  by nesting depth: " + ", ".join(f"{d}: {100 * c / n:.2f}% of {n}" for d, (c, n) in
                                                 row["by_depth"].items()))
    return 0


def run_report(args) -> int:
    from ..lra.report import accuracy_table
    from ..lra.suite import write_report

    rows = write_report(args.folder)
    if not rows:
        raise ValueError(f"lra report: no results.jsonl rows in {args.folder}")
    print(accuracy_table(rows, _floors(args.folder)))
    return 0


def _floors(folder: Path) -> dict:
    path = folder / "baselines.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
