"""Claim 1: "CNN is self-attention restricted to a receptive field; self-attention is the more flexible model,
so it needs more data" (the lecture, after the ViT paper's figure).

Three image classifiers of about the same size, trained on MNIST subsets of growing size with the same optimiser
and the same budget per size, scored on the 10,000 test images:

- ``cnn``: a small convolutional net (four 3 x 3 convolutions, a 2 x 2 max-pool, global average pool);
- ``vit``: ``attnkit.models.VisionTransformer`` on 2 x 2 patches (49 tokens and a class token);
- ``window``: the lecture's "CNN is self-attention restricted to a receptive field": the same encoder as the
  ViT's over the same grid of ``window_patch`` x ``window_patch`` patches (``window_patch`` = 1: every pixel a
  vector), each token attending only to the ``window`` tokens either side in row-major order (``masks.window``
  on the ``local`` backend), the mean of the outputs classified. With ``window`` = grid width + 1 the band holds
  each token's 3 x 3 neighbourhood (and the rest of the rows above and below it, wrapping at row ends).

The images are averaged down to ``side`` x ``side`` (14 x 14 by default: a quarter of the pixels, which keeps
the three models' training within the time budget). Training subsets are nested (the first n of one
permutation per seed) and drawn from the 55,000 training images that remain after ``load_mnist``'s 5,000 dev
images, which are scored too (to choose learning rates: never the test set).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import masks
from ..models.vision import VisionConfig, VisionTransformer, image_to_vectors
from ..nn import Encoder, TransformerConfig
from ..train.state import seed_everything
from .configs.data_size import MODELS, DataSizeConfig
from .runner import accuracy, mean_table, param_count, run_notes, seeds_text, summarize, train_steps
from .scaffold import measure, results, write_markdown

__all__ = ["DataSizeConfig", "MODELS", "CNN", "WindowAttention", "build_model", "steps_for", "run_data_size",
           "load_images", "leads"]

NAMES = {"cnn": "CNN", "vit": "ViT", "window": "self-attention in a 3x3 window"}




def steps_for(config: DataSizeConfig, n: int) -> int:
    """The step budget at training-set size ``n``: ``epochs`` passes, clamped to [min_steps, max_steps]."""
    return int(min(max(math.ceil(config.epochs * n / config.batch_size), config.min_steps), config.max_steps))


class CNN(nn.Module):
    """(B, 1, S, S) -> (B, 10): conv 3x3 (c1) - conv (c1) - max-pool 2 - conv (c2) - conv (c3) - mean - linear.

    The default channels (32, 32, 64, 72) give 70,338 parameters, about the ViT's 71,306 at its defaults."""

    def __init__(self, channels: tuple[int, int, int, int] = (32, 32, 64, 72), classes: int = 10):
        super().__init__()
        c = (1, *channels)
        self.convs = nn.ModuleList(nn.Conv2d(c[i], c[i + 1], 3, padding=1) for i in range(4))
        self.head = nn.Linear(c[-1], classes)

    def forward(self, x: Tensor) -> Tensor:
        for i, conv in enumerate(self.convs):
            x = F.relu(conv(x))
            if i == 1:
                x = F.max_pool2d(x, 2)  # (B, c1, S, S) -> (B, c1, S/2, S/2)
        return self.head(x.mean((2, 3)))  # (B, c3, S/2, S/2) -> (B, c3) -> (B, classes)


class WindowAttention(nn.Module):
    """(B, 1, S, S) -> (B, 10): every p x p patch a vector ((S/p)^2 tokens, learned positions), an ``Encoder``
    whose attention sees ``window`` keys on each side (row-major, the ``local`` backend), the mean of the
    outputs, a linear classifier."""

    def __init__(self, patch: int, encoder: TransformerConfig, window: int, classes: int = 10):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(patch * patch, encoder.d_model)
        self.encoder = Encoder(encoder)
        self.mask = masks.window(window, window)
        self.head = nn.Linear(encoder.d_model, classes)

    def forward(self, x: Tensor) -> Tensor:
        tokens = self.embed(image_to_vectors(x, self.patch))  # (B, N, p*p) -> (B, N, d)
        out = self.encoder(tokens, self.mask, backend="local").last_hidden_state  # (B, N, d)
        return self.head(out.mean(1))


def _encoder(config: DataSizeConfig, tokens: int) -> TransformerConfig:
    d = config.d_model
    return TransformerConfig(d_model=d, num_heads=4, d_ff=2 * d, num_encoder_layers=config.layers,
                             dropout=config.dropout, norm_first=True, activation="gelu", positional="learned",
                             max_len=tokens)


def build_model(config: DataSizeConfig, name: str) -> nn.Module:
    """One of ``MODELS`` at the config's sizes (seed the generators first for a reproducible start)."""
    s = config.side
    if name == "cnn":
        return CNN()
    if name == "vit":
        tokens = (s // config.patch) ** 2 + 1
        return VisionTransformer(VisionConfig(height=s, width=s, mode="patches", patch_size=config.patch,
                                              encoder=_encoder(config, tokens)))
    if name == "window":
        return WindowAttention(config.window_patch, _encoder(config, (s // config.window_patch) ** 2),
                               config.keys_each_side)
    raise ValueError(f"build_model: `name` must be one of {MODELS}, got {name!r}")


def load_images(side: int, data_dir=None) -> dict[str, tuple[Tensor, Tensor]]:
    """MNIST's train (55,000), dev (5,000) and test (10,000) images, normalised, averaged to side x side:
    {split: (images (N, 1, side, side), labels (N,))}."""
    from ..data.images import load_mnist

    data = load_mnist(root=data_dir)
    out = {}
    for split, ex in data.items():
        x = ex.images if side == 28 else F.avg_pool2d(ex.images, 28 // side)  # (N, 1, 28, 28) -> (N, 1, s, s)
        out[split] = (x.contiguous(), ex.labels)
    return out


def _batches(x: Tensor, y: Tensor, size: int):
    return [((x[i:i + size],), y[i:i + size]) for i in range(0, len(y), size)]


def run_one(config: DataSizeConfig, images: dict, name: str, n: int, seed: int) -> dict:
    """Train ``name`` on the first ``n`` images of seed ``seed``'s permutation; score dev and test."""
    x, y = images["train"]
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(1000 + seed))[:n]
    xs, ys = x[order], y[order]
    steps, bs = steps_for(config, n), min(config.batch_size, n)
    gen = torch.Generator().manual_seed(2000 + seed)
    perm: list[Tensor] = []

    def batch(step: int):
        nonlocal perm
        if not perm:  # a fresh pass over the subset, in batches of bs
            perm = list(torch.randperm(n, generator=gen).split(bs))
            perm = [p for p in perm if len(p) == bs] or perm
        idx = perm.pop(0)
        return (xs[idx],), ys[idx]

    seed_everything(seed)
    model = build_model(config, name)
    lr = config.cnn_lr if name == "cnn" else config.attention_lr
    times = train_steps(model, batch, steps, lr=lr, warmup=max(1, steps // 20), seed=seed,
                        what=f"  {NAMES[name]} on {n} images, seed {seed}: training")
    dev = accuracy(model, _batches(*(t[:config.dev_images] for t in images["dev"]), 500))
    test = accuracy(model, _batches(*(t[:config.test_images] for t in images["test"]), 500))
    return {"model": name, "x": n, "seed": seed, "test_accuracy": test, "dev_accuracy": dev, "steps": steps,
            "epochs": steps * bs / n, "lr": lr, "params": param_count(model), "train_seconds": sum(times)}


@functools.cache
def _images(side: int, data_dir) -> dict[str, tuple[Tensor, Tensor]]:
    return load_images(side, data_dir)


def _work(job: tuple) -> list[dict]:
    config, name, n, seed, data_dir = job
    return [run_one(config, _images(config.side, data_dir), name, n, seed)]


def _name(job: tuple) -> str:
    _, name, n, seed, _ = job
    return f"{NAMES[name]} on {n} images, seed {seed}"


def _describe(row: dict) -> str:
    return (f"  {row['model']:>13}  n={row['x']:6d}  seed {row['seed']}  {row['steps']:5d} steps  "
            f"test {100 * row['test_accuracy']:.2f}%  dev {100 * row['dev_accuracy']:.2f}%  "
            f"{row['train_seconds']:.0f} s")


def run_data_size(out, config: DataSizeConfig = DataSizeConfig(), *, data_dir=None, command: str | None = None,
                  workers: int = 1, threads: int | None = None, log: Callable[[str], None] = print,
                  max_minutes: float | None = None) -> tuple[list[dict], dict]:
    """Every model x size x seed (rows already in ``out/results.jsonl`` are kept), in ``workers`` processes of
    ``threads`` torch threads (``runner.run_jobs``); returns (rows, run.json)."""

    def jobs(folder) -> list[tuple]:
        _images.cache_clear()
        _images(config.side, data_dir)  # a missing MNIST fails here, before any worker starts
        # seed by seed (a run stopped by --max-minutes leaves whole seeds), in each the longest jobs first
        return [(config, name, n, seed, data_dir) for seed in range(config.seeds)
                for n in sorted(config.sizes, reverse=True)
                for name in sorted(config.models, key=lambda m: m != "window") if not folder.done(name, n, seed)]

    folder = measure(out, "data-size", config, jobs, _work, _describe, command=command, workers=workers,
                     threads=threads, log=log, max_minutes=max_minutes, name=_name)
    return folder.rows, folder.finish({"workers": workers})


def run(out, config: DataSizeConfig = DataSizeConfig(), *, data_dir=None, command: str | None = None,
        workers: int = 1, threads: int | None = None, log: Callable[[str], None] = print,
        max_minutes: float | None = None) -> dict:
    """``run_data_size`` then ``report``: {"figure", "markdown", "table", "verdict"}."""
    rows, meta = run_data_size(out, config, data_dir=data_dir, command=command, workers=workers, threads=threads,
                               log=log, max_minutes=max_minutes)
    return report(out, config, rows, meta)


def leads(rows: list[dict], models: tuple[str, ...], reference: str = "cnn") -> list[dict]:
    """The reference model's lead in test accuracy over each other model at each size, paired by seed (the same
    subset and order): ``summarize`` rows ``{"model", "x", "mean", "std", "n", ...}`` of the differences."""
    acc = {(r["model"], r["x"], r["seed"]): r["test_accuracy"] for r in rows}
    diffs = [{"model": m, "x": n, "seed": seed, "lead": acc[(reference, n, seed)] - a}
             for (m, n, seed), a in sorted(acc.items()) if m != reference and m in models
             and (reference, n, seed) in acc]
    return summarize(diffs, "lead")


def verdict(lead: list[dict], models: tuple[str, ...]) -> list[str]:
    """Sentences from the CNN's paired leads (``leads``): its lead at the smallest and the largest size, where it
    is smallest, and where (if anywhere) an attention model passes it."""
    out = []
    for m in (m for m in models if m != "cnn"):
        gaps = sorted((s["x"], 100 * s["mean"], 100 * s["std"]) for s in lead
                      if s["model"] == m and s["mean"] is not None)
        if not gaps:
            continue
        (n0, g0, s0), (n1, g1, s1) = gaps[0], gaps[-1]
        least = min(gaps, key=lambda g: abs(g[1]))
        passed = [n for n, g, _ in gaps if g < 0]
        trend = "narrows" if abs(g1) < abs(g0) else "does not narrow"
        out.append(f"- CNN minus {NAMES[m]}: {g0:+.1f} ± {s0:.1f} points at {n0:,} images, {g1:+.1f} ± {s1:.1f} at "
                   f"{n1:,} (smallest, {least[1]:+.1f}, at {least[0]:,}): the gap {trend}"
                   + (f"; the {NAMES[m]} is ahead at {', '.join(f'{n:,}' for n in passed)} images." if passed
                      else f"; no crossover up to {n1:,} images."))
    return out


def report(out, config: DataSizeConfig, rows: list[dict], meta: dict) -> dict:
    """``out/data_size.png`` and ``out/data_size.md`` from the rows; returns their paths and the verdict."""
    from ..viz.claims import data_size_figure

    out = Path(out)
    res = results(rows, config.models)
    test, dev, models, params = res.test, res.dev, res.present, res.params
    lead = leads(rows, models)
    figure = data_size_figure(test, out / "data_size.png", NAMES, seeds=config.seeds, leads=lead,
                              note=f"; MNIST at {config.side} x {config.side}")
    budget = ", ".join(f"{n:,}: {steps_for(config, n)}" for n in config.sizes)
    lines = ["# Self-attention against a CNN by training-set size (MNIST)", "", *run_notes(meta), "",
             "Models: " + "; ".join(f"{NAMES[m]} ({params[m]:,} parameters)" for m in models) + ". "
             f"AdamW, linear warm-up then cosine decay, batch {config.batch_size}, peak learning rate "
             f"{config.cnn_lr:g} (CNN) and {config.attention_lr:g} (attention models), dropout {config.dropout:g} "
             f"in the attention models.", "",
             f"Budget (steps at each size: {config.epochs:g} epochs clamped to [{config.min_steps}, "
             f"{config.max_steps}]): {budget}.", "",
             f"## Test accuracy (%), mean ± standard deviation over {seeds_text(config.seeds)}", "",
             mean_table(test, models, "training images", names=NAMES, digits=2), "",
             "## The CNN's lead (accuracy points), mean ± standard deviation of the per-seed difference", "",
             mean_table(lead, tuple(m for m in models if m != "cnn"), "training images", names=NAMES, digits=2), "",
             *verdict(lead, models), "",
             f"## Dev accuracy (%): {config.dev_images:,} of the 5,000 held-out training images, for choosing learning "
             "rates", "",
             mean_table(dev, models, "training images", names=NAMES, digits=2), ""]
    md = write_markdown(out / "data_size.md", lines)
    return {"figure": figure, "markdown": md, "verdict": verdict(lead, models), "table": mean_table(
        test, models, "training images", names=NAMES, digits=2)}
