import sys
from pathlib import Path

import pytest
import torch
from hypothesis import settings

settings.register_profile("attnkit", max_examples=25, deadline=None, derandomize=True)
settings.load_profile("attnkit")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """Tiny tensors: one thread avoids OpenMP hand-offs that stall on a busy shared machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)



@pytest.fixture(scope="session")
def bench_script():
    """``bench_script("nat_cost")``: the module of ``bench/nat_cost.py`` (bench/ is on sys.path only for the import)."""
    folder = str(Path(__file__).resolve().parents[1] / "bench")

    def load(name: str):
        sys.path.insert(0, folder)
        try:
            return __import__(name)
        finally:
            sys.path.remove(folder)
    return load
