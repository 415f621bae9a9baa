"""Is Pathfinder's label in its pixels, and in what? Two references beside LRA-lite's attention cells.

1. The dots' distance rule: "connected iff the two dots are between lo and hi pixels apart", the band chosen on
   half of freshly drawn images (the generator knows where it put the dots) and scored on the other half,
   for the generator as the suite uses it and with ``match_distance`` off.
2. A small CNN (seven 3x3 convolutions, dilations 1-4, max pooling; not an attention model) trained on the
   cell's own image files: how far a model with a locality prior gets on the same data and budget of steps.

    .venv/bin/python bench/pathfinder_baselines.py --data-dir runs/lra/data/pathfinder-L256-... --steps 3000

The data folder is the one ``attnkit lra cell --task pathfinder`` writes (or ``attnkit lra generate
pathfinder``); without ``--data-dir`` only the rule runs.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from attnkit.data import pathfinder as P
from attnkit.lra.settings import SUITES
from attnkit.lra.tasks import pathfinder_config


def dot_distances(cfg: P.PathfinderConfig, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n fresh images' dot distances (n,) and labels (n,) bool (every other image positive)."""
    rng = np.random.default_rng(seed)
    dist = [float(np.linalg.norm(np.subtract(*P._image(rng, i % 2 == 0, cfg)[1]["dots"]))) for i in range(n)]
    return np.array(dist), np.arange(n) % 2 == 0


def band_rule(dist: np.ndarray, positive: np.ndarray, step: float = 0.25) -> tuple[float, float, float]:
    """(lo, hi, accuracy on the second half) of the band of distances that best gives the label on the first."""
    half = len(dist) // 2
    grid = np.arange(0.0, float(dist.max()) + step, step)
    first = [(lo, hi) for lo in grid for hi in grid if hi > lo]
    lo, hi = max(first, key=lambda b: (((dist[:half] >= b[0]) & (dist[:half] <= b[1])) == positive[:half]).mean())
    return float(lo), float(hi), float((((dist[half:] >= lo) & (dist[half:] <= hi)) == positive[half:]).mean())


def small_cnn(width: int = 32) -> nn.Sequential:
    """(B, 1, S, S) -> (B, 2): seven 3x3 convolutions (dilations 1, 1, 2, 2, 4, 4, 1), then max over the image."""
    layers, c = [], 1
    for d in (1, 1, 2, 2, 4, 4, 1):
        layers += [nn.Conv2d(c, width, 3, padding=d, dilation=d), nn.BatchNorm2d(width), nn.ReLU()]
        c = width
    return nn.Sequential(*layers, nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(width, 2))


def _split(folder: Path, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = P.read_pathfinder(folder / P.PATHFINDER_FILES[name])
    return torch.from_numpy(images).float()[:, None] / 255, torch.from_numpy(labels).long()  # (N, 1, S, S), (N,)


@torch.no_grad()
def accuracy(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    net.eval()
    hits = sum(int((net(x[i:i + 512]).argmax(1) == y[i:i + 512]).sum()) for i in range(0, len(x), 512))
    net.train()
    return hits / max(1, len(x))


def train_cnn(folder: Path, steps: int, batch: int, seed: int) -> dict:
    """Train ``small_cnn`` on the folder's train split (AdamW, one-cycle 2e-3); val and test accuracy of the end."""
    torch.manual_seed(seed)
    (xtr, ytr), (xva, yva), (xte, yte) = (_split(folder, s) for s in ("train", "val", "test"))
    net = small_cnn()
    opt = torch.optim.AdamW(net.parameters(), 2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 2e-3, total_steps=steps)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        i = torch.randint(0, len(xtr), (batch,))
        loss = nn.functional.cross_entropy(net(xtr[i]), ytr[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % max(1, steps // 5) == 0:
            print(f"  cnn step {step}/{steps}  loss {loss.item():.4f}  val {100 * accuracy(net, xva, yva):.2f}%",
                  flush=True)
    return {"val": accuracy(net, xva, yva), "test": accuracy(net, xte, yte), "seconds": time.perf_counter() - start,
            "train_images": len(xtr)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="pathfinder", help="the LRA-lite task whose generator settings to use")
    p.add_argument("--images", type=int, default=2000, help="fresh images for the distance rule (half choose it)")
    p.add_argument("--data-dir", type=Path, help="a Pathfinder data folder (pathfinder_{train,val,test}.npz)")
    p.add_argument("--steps", type=int, default=3000, help="CNN training steps")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    if a.images < 4:
        p.error(f"--images must be at least 4, got {a.images}")
    if a.data_dir is not None and not all((a.data_dir / f).exists() for f in P.PATHFINDER_FILES.values()):
        p.error(f"--data-dir: {a.data_dir} holds no pathfinder_{{train,val,test}}.npz")
    torch.set_num_threads(a.threads)
    s = SUITES["full"][a.task]
    side = math.isqrt(s.seq_len)
    print(f"Pathfinder-{side}, {a.images} fresh images per generator (the band chosen on half, scored on the other)")
    print("| references | accuracy % |\n|---|---:|")
    for match in (True, False):
        cfg = pathfinder_config(side, s.replace(generator={**s.generator, "match_distance": match}), a.seed)
        lo, hi, acc = band_rule(*dot_distances(cfg, a.images, a.seed + 1))
        print(f"| dots {lo:g}-{hi:g} px apart (match_distance {match}) | {100 * acc:.2f} |", flush=True)
    if a.data_dir is not None:
        r = train_cnn(a.data_dir, a.steps, a.batch_size, a.seed)
        print(f"| small CNN, {a.steps} steps of {a.batch_size} on {r['train_images']:,} images ({r['seconds']:.0f} s;"
              f" val {100 * r['val']:.2f}) | {100 * r['test']:.2f} |")


if __name__ == "__main__":
    main()
