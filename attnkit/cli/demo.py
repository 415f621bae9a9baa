"""``attnkit demo``: the main job. Trains the image model on scikit-learn's bundled 8x8 digits
(no download), prints ``test accuracy: 0.xxxx`` and writes the class token's attention maps.

Each 8x8 digit is 16 vectors (2x2 patches) plus a class token; a 2-layer, 4-head encoder
(d_model 64) learns to classify them. The lecture walk-through is ``attnkit lecture``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..nn import TransformerConfig
from ..tasks import image
from ..train import TrainConfig, Trainer
from .train import floor


def run(out: Path, epochs: int = 60, seed: int = 0, progress: bool = True, max_minutes: float = 2.5,
        threads: int = 1) -> dict:
    import torch

    torch.set_num_threads(threads)  # small model: one thread is faster, and much faster on a busy machine
    t0 = time.perf_counter()
    args = argparse.Namespace(dataset="digits", train=None, download=False, mode="patches", patch_size=2,
                              shift=0, limit=None)
    task = image.build(args, TransformerConfig(**image.ENCODER_DEFAULTS), seed=seed)
    cfg = TrainConfig(**{**image.TRAIN_DEFAULTS, "epochs": epochs, "seed": seed, "progress": progress,
                         "max_minutes": max_minutes, "eval_every": 105})
    n_params = sum(p.numel() for p in task.model.parameters())
    print(f"digits: {len(task.train)} train / {len(task.dev)} dev / {len(task.test)} test images of 8x8; "
          f"each = 16 patch vectors + a class token; model {n_params} parameters")
    res = Trainer(task, cfg).fit(out)
    if res["interrupted"] and "test" not in res:  # stopped by the time budget: score what we have
        from ..train import evaluate

        res["test"] = evaluate(task, task.model, task.test, progress=False)
    model = task.model.eval()
    maps = []
    with torch.no_grad():
        from ..viz.image_attention import class_token_maps

        for i in range(4):
            x, y = task.test[i]
            logits, attn = model(x[None], need_weights=True)
            pred = int(logits.argmax())
            maps.append(class_token_maps(x, torch.stack([a[0] for a in attn]), model.config,
                                         out / f"attention_test{i}.png", title=f"true {y}, predicted {pred}"))
    print(f"trained {res['step']} steps in {res['train_seconds']:.1f} s "
          f"(total {time.perf_counter() - t0:.1f} s)")
    for p in maps:
        print(f"wrote {p}")
    print(f"wrote {out / 'curves.png'} and {out / 'metrics.jsonl'}; checkpoint in {out}")
    print(f"test accuracy: {floor(res['test']['accuracy'])}")
    return res


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the main job: train a Transformer on 8x8 digits (< 3 min), show attention")
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder")
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-minutes", type=float, default=2.5, help="stop training after this long (0 = no limit)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest for this small model)")
    p.set_defaults(func=lambda a: run(a.out, a.epochs, a.seed, max_minutes=a.max_minutes, threads=a.threads) and 0)
