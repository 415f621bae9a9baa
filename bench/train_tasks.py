"""Train the task models on the real datasets, as recorded in BENCHMARKS.md.

    .venv/bin/python bench/train_tasks.py tagger      # UD English EWT UPOS, from scratch
    .venv/bin/python bench/train_tasks.py classifier  # SST-2, from scratch
    .venv/bin/python bench/train_tasks.py digits      # scikit-learn 8x8 digits (= attnkit demo)
    .venv/bin/python bench/train_tasks.py mnist       # MNIST, ViT patches

Each run calls ``attnkit train`` with the arguments below (printed first), writes its run folder
under runs/bench/<task>, and prints the measured training time and accuracies. Data come from
``../shared/data`` (or $ATTNKIT_DATA). Times depend on the machine's load: quote them as measured.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import torch

from attnkit.cli.main import main

RUNS = {
    "tagger": ["train", "tagger", "--epochs", "12", "--max-minutes", "20"],
    "classifier": ["train", "classifier", "--max-minutes", "20"],
    "digits": ["train", "image", "--dataset", "digits"],
    "mnist": ["train", "image", "--dataset", "mnist", "--epochs", "24", "--max-minutes", "15", "--batch-size", "128",
              "--lr", "2e-3", "--warmup-steps", "300", "--patch-size", "7", "--num-encoder-layers", "3",
              "--d-model", "96", "--d-ff", "192", "--shift", "1", "--threads", "2"],
    "tagger-minilm": ["train", "tagger", "--pretrained", "all-MiniLM-L6-v2", "--epochs", "2", "--max-minutes", "55",
                      "--lr", "1e-4", "--batch-size", "16", "--warmup-steps", "100", "--eval-every", "800"],
    "classifier-minilm": ["train", "classifier", "--pretrained", "all-MiniLM-L6-v2", "--epochs", "1",
                          "--max-minutes", "25", "--lr", "7e-5", "--batch-size", "16", "--warmup-steps", "200",
                          "--eval-every", "2000", "--threads", "2"],
}


def run(name: str, extra: list[str]) -> dict:
    out = Path("runs/bench") / name
    if "--out" in extra:  # another run folder for a variant: --out runs/bench/tagger-b
        i = extra.index("--out")
        out, extra = Path(extra[i + 1]), extra[:i] + extra[i + 2:]
    argv = [*RUNS[name], "--out", str(out), *extra]
    print("command: attnkit " + " ".join(argv), flush=True)
    t0 = time.perf_counter()
    rc = main(argv)
    wall = time.perf_counter() - t0
    res = json.loads((out / "result.json").read_text())
    summary = {"task": name, "rc": rc, "wall_seconds": wall, "train_seconds": res["train_seconds"],
               "params": res["params"], "steps": res["step"], "dev": res.get("best_dev", res.get("dev")),
               "test": res.get("test"), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"}
    print(json.dumps(summary, indent=1), flush=True)
    return summary


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in RUNS:
        sys.exit(f"usage: bench/train_tasks.py {{{','.join(RUNS)}}} [extra attnkit train options]")
    run(sys.argv[1], sys.argv[2:])
