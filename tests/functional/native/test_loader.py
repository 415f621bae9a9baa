"""The native extension's loader: its build name, what it says while building, and life without a build."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import attnkit
from attnkit import masks as M
from attnkit.functional import native, select_backend


@pytest.fixture
def no_kernel(monkeypatch):
    """Make the build fail (as with no compiler), then restore the real, cached kernel afterwards."""
    import torch.utils.cpp_extension as ext

    def fail(*args, **kwargs):
        raise RuntimeError("Ninja is required to load C++ extensions")

    native._kernel.cache_clear()
    monkeypatch.setattr(ext, "load", fail)
    yield
    monkeypatch.undo()
    native._kernel.cache_clear()


def test_failed_build_warns_once_and_the_pytorch_paths_run(no_kernel, caplog):
    with caplog.at_level(logging.WARNING, logger="attnkit"), pytest.warns(RuntimeWarning, match="Ninja is required"):
        assert native.kernel() is None
    tried = [r.getMessage() for r in caplog.records]
    chain = native.isa.supported()
    chain = chain[chain.index(native.isa.selected()):]  # from the chosen (or ATTNKIT_CPU_ISA's) down to generic
    assert len(tried) == len(chain)  # each said once
    assert all("Ninja is required" in m for m in tried) and "using the PyTorch paths" in tried[-1]
    assert native.kernel() is None  # cached: no second warning, no second build
    assert "Ninja is required" in native.unavailable() and native.cpu_isa() is None
    q, k, v = (torch.randn(2, 2, 700, 16) for _ in range(3))
    mask = M.window(20, 20) & M.padding(torch.tensor([700, 300]))
    with torch.no_grad():
        assert select_backend(q, k, v, mask) == "local"
        out = attnkit.attention(q, k, v, mask)  # local's PyTorch forward
        torch.testing.assert_close(out, attnkit.attention(q, k, v, mask, backend="math"), atol=2e-6, rtol=1e-5)
        short = q[:, :, :20]
        assert select_backend(short, short, short) not in ("tiled", "short")  # their rows need the kernel
        assert select_backend(short, short, short, M.causal()) not in ("tiled", "short")
        for name in ("tiled", "short"):  # named explicitly: they raise, saying why, instead of substituting
            with pytest.raises(ValueError, match=f"backend '{name}' needs attnkit's native kernel.*Ninja"):
                attnkit.attention(short, short, short, backend=name)
    assert "build of attnkit_native failed" in attnkit.functional.capabilities()["short"].available


def test_a_failed_build_falls_back_to_the_next_variant_down(monkeypatch, caplog):
    """The best variant's build fails: the next one down runs, said once; the variants are separate builds."""
    import torch.utils.cpp_extension as ext

    runs = native.isa.supported()
    runs = runs[runs.index(native.isa.selected()):]  # from the chosen (or ATTNKIT_CPU_ISA's) variant down
    if len(runs) < 2:
        pytest.skip("the generic variant is the only one to run here")
    real = ext.load

    def fail_best(name, *args, **kwargs):
        if name.startswith(f"attnkit_native_{runs[0]}_"):
            raise RuntimeError("error: this compiler cannot target it")
        return real(name, *args, **kwargs)

    native._kernel.cache_clear()
    monkeypatch.setattr(ext, "load", fail_best)
    try:
        with caplog.at_level(logging.WARNING, logger="attnkit"):
            assert native.kernel() is not None and native.cpu_isa() == runs[1]
        said = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
        assert said == [f"attnkit: the {runs[0]} build of attnkit_native failed (RuntimeError: error: this compiler "
                        f"cannot target it); using the {runs[1]} variant"]
        assert native.unavailable() is None
    finally:
        monkeypatch.undo()
        native._kernel.cache_clear()


def test_build_name_covers_every_source_and_the_build_command(tmp_path, monkeypatch):
    import torch.utils.cpp_extension as ext

    name = native.build_name()
    assert name.startswith(f"attnkit_native_{native.isa.selected()}_") and native.build_name() == name
    assert len({native.build_name(variant=v) for v in native.isa.supported()}) == len(native.isa.supported())
    copy = tmp_path / "csrc"
    copy.mkdir()
    for f in native.CSRC.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    monkeypatch.setattr(native, "CSRC", copy)
    assert native.build_name() == name
    (copy / "vec.h").write_text((copy / "vec.h").read_text() + "\n// a header changed\n")
    changed = native.build_name()
    assert changed != name  # torch's own cache only watches the .cpp files it is given
    monkeypatch.setattr(ext, "include_paths", lambda *a, **k: ["/elsewhere/torch/include"])
    assert native.build_name() != changed  # another torch path: another build, not a rebuild


def test_a_symlinked_environment_gets_its_own_build_name(tmp_path):
    """Two paths to one torch (a symlink) compile with different include paths; the build name follows the
    path the compiler is given, so neither makes ninja rebuild the other's build on every load."""
    site = Path(torch.__file__).parent.parent
    link = tmp_path / "site"
    link.symlink_to(site, target_is_directory=True)
    code = ("import torch, attnkit.functional.native as n, torch.utils.cpp_extension as e; "
            "print(n.build_name(), e.include_paths()[0], torch.__file__)")
    repo = Path(attnkit.__file__).parent.parent

    def run(path: str) -> list[str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, str(repo)])}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    direct, linked = run(str(site)), run(str(link))
    assert linked[2].startswith(str(link)) and direct[2].startswith(str(site))  # torch imported through each
    assert linked[1].startswith(str(link))  # the compiler would get the unresolved path
    assert direct[0] != linked[0]


def test_every_build_is_announced(tmp_path, monkeypatch, caplog):
    """No build yet: said before it starts. An existing build that is rebuilt: said after SLOW_LOAD_S, and
    every build says when it is done. A build that is up to date loads silently."""
    import torch.utils.cpp_extension as ext

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(native, "SLOW_LOAD_S", 0.05)
    seconds = {"build": 0.3}

    def fake_load(name, sources, build_directory, **kwargs):
        assert all(Path(s).is_file() for s in sources)  # staged copies of csrc/*.cpp
        if seconds["build"]:
            time.sleep(seconds["build"])
            lib = Path(build_directory) / f"{name}.so"
            lib.write_bytes(b"new build")
            os.utime(lib, ns=(time.time_ns(), time.time_ns()))
        return "module"

    monkeypatch.setattr(ext, "load", fake_load)

    def load_once() -> list[str]:
        native._kernel.cache_clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="attnkit"):
            assert native.kernel() == "module"
        return [r.getMessage() for r in caplog.records]

    try:
        first = load_once()  # nothing built yet
        assert first[0].startswith("attnkit: compiling the native kernel") and "built the native kernel" in first[-1]
        again = load_once()  # rebuilt although a build exists (e.g. its build files changed)
        assert any("rebuilding the native kernel" in m for m in again) and "built the native kernel" in again[-1]
        seconds["build"] = 0
        monkeypatch.setattr(native, "SLOW_LOAD_S", 30.0)  # (so that a stalled machine cannot trip the timer)
        assert load_once() == []  # up to date: nothing to say
    finally:
        native._kernel.cache_clear()
