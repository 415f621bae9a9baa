import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import settings

settings.register_profile("attnkit", max_examples=25, deadline=None, derandomize=True)
settings.load_profile("attnkit")


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionstart(session):
    """Under pytest-xdist, once the workers are started (and the session's clock), the native kernels' missing
    builds are made, one per worker at a time (``native_builds.py``: else the workers wait on each other's builds)."""
    yield
    config = session.config
    jobs = len(config.getoption("tx", None) or [])
    if hasattr(config, "workerinput") or jobs < 2:
        return
    from . import native_builds

    todo = native_builds.missing()
    if todo:
        built, seconds = native_builds.build(todo, jobs, config.rootpath)
        config.get_terminal_writer().line(f"native kernels: {built} of {len(todo)} missing builds made in "
                                          f"{seconds:.0f} s, {jobs} at a time")


@pytest.hookimpl(trylast=True)  # after pytest's grouping of the tests that share a parameter
def pytest_collection_modifyitems(items):
    """The tests marked ``slow`` run first (in the order collected, the rest after them as collected): pytest-xdist
    hands tests out in this order, so no long one is left to run alone at the end of a run."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_generate_tests(metafunc):
    """A test that uses ``cpu_variant`` (a module's ``pytestmark = pytest.mark.usefixtures("cpu_variant")``) runs
    once per variant of the native kernels this CPU runs: on an AVX-512 host avx512, avx2 and generic."""
    if "cpu_variant" in metafunc.fixturenames:
        from attnkit.functional.native import isa

        metafunc.parametrize("cpu_variant", isa.supported(), indirect=True, scope="module")


@pytest.fixture(scope="module")
def cpu_variant(request):
    """Forces the native kernels' variant (``ATTNKIT_CPU_ISA``) for the tests of a module, then restores it."""
    from attnkit.functional.native import isa

    before = os.environ.get(isa.ENV)
    os.environ[isa.ENV] = request.param
    yield request.param
    if before is None:
        os.environ.pop(isa.ENV, None)
    else:
        os.environ[isa.ENV] = before


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


# The worker's torch thread count: one under `make test` (OMP_NUM_THREADS=1, one per pytest-xdist worker).
THREADS = torch.get_num_threads()


@pytest.fixture(scope="session", autouse=True)
def _cli_threads():
    """The CLI's ``--threads`` default (``cli.options.default_threads``: this machine's cores) is the worker's count
    in tests: taken as it is, it puts two threads in each of `make test`'s two workers on two cores, where every small
    op's threads wait on each other (a tiny model's training many times slower), and it stayed set for the worker's
    later tests. Yields the real default."""
    from attnkit.cli import options

    real = options.default_threads
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(options, "default_threads", lambda: THREADS)
        yield real


@pytest.fixture(autouse=True)
def _threads(request, monkeypatch, _cli_threads):
    """Each test starts and ends with the worker's thread count (a command run in a test sets torch's, for the whole
    process); the tests of the ``--threads`` default itself, marked ``machine_threads``, see the real default."""
    if request.node.get_closest_marker("machine_threads") is not None:
        from attnkit.cli import options

        monkeypatch.setattr(options, "default_threads", _cli_threads)
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(THREADS)


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
