"""A tiny generated task for the engine tests: 2-D points, label = which side of a line."""

from __future__ import annotations

import torch
from torch import nn

from attnkit.train import Task


def toy_task(n: int = 96, seed: int = 0, model_seed: int = 0) -> Task:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    data = list(zip(x, y))
    torch.manual_seed(model_seed)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))

    def collate(examples):
        return torch.stack([e[0] for e in examples]), torch.stack([e[1] for e in examples])

    def forward(m, batch):
        xb, yb = batch
        return m(xb), yb

    return Task("toy", model, data[: n * 3 // 4], collate, forward, dev=data[n * 3 // 4:], test=data[n * 3 // 4:],
                meta={"model": {"hidden": 16}, "labels": ["left", "right"]})
