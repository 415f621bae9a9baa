"""Multi-process data parallelism under ``torchrun`` (DistributedDataParallel).

``torchrun --nproc_per_node=2 -m attnkit.cli.main train ...`` sets RANK / WORLD_SIZE / LOCAL_RANK;
``setup()`` then joins the process group (gloo on CPU, nccl on GPU). Without those variables
everything is a no-op and the world has one process. Only rank 0 logs and saves.
"""

from __future__ import annotations

import gc
import os

import torch
import torch.distributed as dist
from torch import nn


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def is_main() -> bool:
    return rank() == 0


def check_device(device: str) -> torch.device:
    """``device`` as a torch.device, or a ValueError saying it is unknown or not available here."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(f"device: unknown device {device!r}; use cpu, cuda, cuda:N or mps") from None
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if not available.get(dev.type, False):
        have = [k for k, v in available.items() if v]
        raise ValueError(f"device: {device!r} is not available on this machine (available: {', '.join(have)})")
    return dev


def setup(device: str | None = None) -> torch.device:
    """Join the torchrun process group if launched by torchrun; return this process's device
    (``device``, checked; by default cuda when available, else cpu)."""
    if device is not None:
        check_device(device)
    use_cuda = torch.cuda.is_available() and (device is None or torch.device(device).type == "cuda")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    if use_cuda:
        index = torch.device(device).index if device else None
        local = int(os.environ["LOCAL_RANK"]) if "LOCAL_RANK" in os.environ else (index or 0)
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device(device or "cpu")


def teardown(synchronize: bool = True) -> None:
    """Leave the process group. ``synchronize``: first wait at a barrier until every rank is done
    (the normal end of a run; skip it when this rank is failing, so it does not wait on the others),
    then collect reference cycles, so nothing they keep alive still holds the group (a DDP wrapper in a
    cycle would) when it is destroyed here, while the interpreter is fully alive."""
    if dist.is_available() and dist.is_initialized():
        if synchronize and dist.get_world_size() > 1:
            dist.barrier()
        gc.collect()
        dist.destroy_process_group()


def wrap(model: nn.Module) -> nn.Module:
    """DDP-wrap the model when the world has more than one process."""
    if world_size() > 1:
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    return model


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if hasattr(model, "module") else model


def barrier() -> None:
    if world_size() > 1:
        dist.barrier()


def all_reduce_sum(values: list[float]) -> list[float]:
    """Sum numbers over processes (float64)."""
    if world_size() == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def gather_rng(state: dict) -> list[dict]:
    """Every rank's RNG state (``attnkit.train.state.rng_state``), in rank order (all ranks call it)."""
    if world_size() == 1:
        return [state]
    from .state import from_bytes, to_bytes

    data = torch.frombuffer(bytearray(to_bytes(state)), dtype=torch.uint8)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world_size())]
    dist.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.int64))
    longest = int(max(sizes))
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[:data.numel()] = data
    parts = [torch.zeros(longest, dtype=torch.uint8) for _ in sizes]
    dist.all_gather(parts, padded)
    return [from_bytes(p[:int(n)].numpy().tobytes()) for p, n in zip(parts, sizes)]


def any_flag(flag: bool) -> bool:
    """True on every rank if any rank's flag is True (used to stop all ranks at a non-finite loss)."""
    if world_size() == 1:
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int64)
    dist.all_reduce(t)
    return bool(t.item())


def broadcast_flag(flag: bool) -> bool:
    """True on every rank if rank 0's flag is True (used to stop all ranks together on Ctrl-C)."""
    if world_size() == 1:
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int64)
    dist.broadcast(t, src=0)
    return bool(t.item())
