"""Scoring a model on a data set, and what training and scoring share: device moves and autocast."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import distributed as dist
from .metrics import IGNORE, count_correct
from .progress import ticker, tqdm_bar

if TYPE_CHECKING:
    from .engine import Task


def to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def autocast(device: torch.device | str, bf16: bool):
    """bfloat16 autocast on the model's device type (cpu, cuda, mps, ...) when ``bf16``. A device type
    without autocast support trains in float32, with a warning, rather than failing."""
    kind = torch.device(device).type
    if not bf16:
        return contextlib.nullcontext()
    if not torch.amp.is_autocast_available(kind):
        warnings.warn(f"bf16: autocast is not available on {kind}; running in float32", stacklevel=2)
        return contextlib.nullcontext()
    return torch.autocast(kind, dtype=torch.bfloat16)


@torch.no_grad()
def evaluate(task: Task, model: nn.Module, data: Sequence, *, batch_size: int = 128, bf16: bool = False,
             device: torch.device | str = "cpu", progress: bool | None = None, desc: str = "eval") -> dict:
    """Accuracy and mean loss of ``model`` on ``data`` (sharded over torchrun processes, then summed).
    ``progress``: a bar (None: when stderr is a terminal); without one, a plain line at least every 10 s of a
    long evaluation (``progress.ticker``)."""
    if len(data) == 0:
        raise ValueError(f"evaluate: the {desc} dataset is empty")
    was = model.training
    model.eval()
    r, w = dist.rank(), dist.world_size()
    idx = list(range(r, len(data), w))
    try:  # batches of similar lengths pad less (examples whose first field has a length: token ids)
        idx.sort(key=lambda j: len(data[j][0]))
    except TypeError:
        pass
    correct = counted = loss_sum = 0.0
    bar = ticker(f"{desc}: scoring", len(idx), "examples", bars=progress) if dist.is_main() else \
        tqdm_bar(total=len(idx), disable=True)  # a bar, or plain lines when it runs long
    for i in range(0, len(idx), batch_size):
        chunk = [data[j] for j in idx[i:i + batch_size]]
        batch = to_device(task.collate(chunk), torch.device(device))
        with autocast(device, bf16):
            logits, targets = task.forward(model, batch)[:2]
        logits = logits.float()
        c, n = count_correct(logits, targets)
        if n:
            loss_sum += float(F.cross_entropy(logits, targets, ignore_index=IGNORE, reduction="sum"))
        correct, counted = correct + c, counted + n
        bar.update(len(chunk))
    bar.close()
    correct, counted, loss_sum = dist.all_reduce_sum([correct, counted, loss_sum])
    model.train(was)
    return {"accuracy": correct / max(counted, 1), "loss": loss_sum / max(counted, 1), "count": int(counted)}
