"""attnkit's kernels' native extension, ``attnkit_native``: C++ kernels for AVX-512 CPUs, compiled on first use.

The sources are in ``csrc/``, by concept: ``simd.h`` (the AVX-512 helpers they share: exp, bfloat16 loads
and stores, uninitialised scratch), ``window_attention.h`` (attention over a key window: backends ``tiled``
and ``local``), ``short_attention.h`` (full attention over short sequences: backend ``short``),
``add_norm.h`` (LayerNorm of a residual sum: ``functional.norm``), ``small_linear.h`` and ``panel_linear.h``
(linear layers over a few rows: ``inference.packed``), ``best_tokens.h`` (each row's best allowed token:
``functional.tokens``), their checked entry points ``attention_ops.h``, ``norm_ops.h``, ``linear_ops.h`` and
``best_tokens.h`` (every device, dtype, shape, stride and length a kernel relies on is a TORCH_CHECK there),
and ``module.cpp``, the one translation unit, which binds them (torch's headers cost most of the build, so they
are parsed once). Whole layers made of these entry points are the inference layer's (``attnkit/inference/
native``): another extension, built the same way by ``extension`` from its own sources and these headers.

``kernel()`` returns the compiled module, or None where it cannot run: no AVX-512, no compiler, a
failed build (``unavailable()`` says which). Callers then use their PyTorch paths, which are also the
references the tests hold the kernels to. ``torch.utils.cpp_extension`` builds it (ninja, about a minute)
into torch's extension cache (``~/.cache/torch_extensions``) under a name that hashes every source and
everything the build command holds (torch's include and library paths as torch passes them to the
compiler, flags, compiler), so two environments never rebuild each other's build. Every build is
announced on stderr (the ``attnkit`` logger): before it starts when no build exists, after a few
seconds when an existing one is being rebuilt, and once it is done.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import sysconfig
import threading
import time
import warnings
from pathlib import Path

import torch

__all__ = ["kernel", "unavailable", "build_name", "lengths_arg", "CSRC", "extension"]

CSRC = Path(__file__).with_name("csrc")
FLAGS = ["-O3", "-fopenmp", "-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma"]
SLOW_LOAD_S = 3.0  # an existing build loads in well under a second; longer means it is being rebuilt
log = logging.getLogger("attnkit")


def _sources(dirs: tuple[Path, ...] = ()) -> list[Path]:
    """The .cpp and .h files of csrc/ and of ``dirs`` (another extension's own sources)."""
    return [f for d in (CSRC, *dirs) for f in sorted(d.iterdir()) if f.suffix in (".cpp", ".h")]


def build_name(dirs: tuple[Path, ...] = (), prefix: str = "attnkit_native") -> str:
    """``<prefix>_<digest>``: the digest covers every file in csrc/ (and ``dirs``; torch's build cache only
    watches the .cpp files it is given) and the build command's inputs exactly as torch writes them, unresolved
    paths included (a symlinked environment is another build, not a rebuild of this one)."""
    from torch.utils.cpp_extension import include_paths, library_paths

    parts = [torch.__version__, *include_paths(), *library_paths(), sysconfig.get_paths()["include"],
             os.environ.get("CXX", "c++"), *FLAGS]
    digest = hashlib.sha256("|".join(parts).encode())
    for f in _sources(dirs):
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return f"{prefix}_{digest.hexdigest()[:12]}"


def lengths_arg(lengths: torch.Tensor | None) -> torch.Tensor:
    """Padding lengths as the kernels take them: contiguous int64 on the CPU, or an empty tensor for none."""
    if lengths is None:
        return torch.empty(0, dtype=torch.int64)
    return lengths.to(device="cpu", dtype=torch.int64).reshape(-1).contiguous()


def _cpu_problem() -> str | None:
    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - older torch without the query: be safe
        return "torch cannot report the CPU's instruction sets"
    return None if cap.startswith("AVX512") else f"the CPU has no AVX-512 (torch reports {cap})"


def _staged_sources(build_dir: Path, dirs: tuple[Path, ...] = ()) -> list[str]:
    """Copy csrc/ (and ``dirs``) into the build directory, one folder, and return the copies of the .cpp files to
    compile: csrc/'s, or those of ``dirs`` when given (their translation unit includes csrc/'s headers). Every
    checkout with the same sources then compiles the same paths, so two clones do not make ninja rebuild for each
    other."""
    src = build_dir / "src"
    src.mkdir(parents=True, exist_ok=True)
    for f in _sources(dirs):
        if not (src / f.name).exists():
            tmp = src / f".{f.name}.{os.getpid()}.tmp"
            tmp.write_bytes(f.read_bytes())
            os.replace(tmp, src / f.name)  # atomic: a concurrent process sees no file or the whole file
    own = [f for d in dirs for f in sorted(d.iterdir())] if dirs else _sources()
    return [str(src / f.name) for f in own if f.suffix == ".cpp"]


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _load(name: str, dirs: tuple[Path, ...] = ()):
    from torch.utils.cpp_extension import _get_build_directory, load  # torch's own cache location for ``name``

    build_dir = Path(_get_build_directory(name, verbose=False))
    library = build_dir / f"{name}.so"
    before = _stamp(library)
    timer = None
    if before is None:
        log.warning("attnkit: compiling the native kernel %s (once per environment, about a minute)", name)
    else:
        timer = threading.Timer(SLOW_LOAD_S, log.warning, (
            "attnkit: rebuilding the native kernel %s: its build in %s is out of date (about a minute)",
            name, build_dir))
        timer.daemon = True
        timer.start()
    start = time.monotonic()
    try:
        module = load(name, _staged_sources(build_dir, dirs), extra_cflags=FLAGS, build_directory=str(build_dir),
                      verbose=False)
    finally:
        if timer is not None:
            timer.cancel()
    if _stamp(library) != before:
        log.warning("attnkit: built the native kernel %s in %.1f s", name, time.monotonic() - start)
    return module


_PROBLEM: list[str] = []  # why kernel() is None, once it has been tried


@functools.cache
def kernel():
    """The compiled ``attnkit_native`` module, or None (see the module docstring); built once per process."""
    _PROBLEM.clear()
    problem = _cpu_problem()
    if problem is None:
        try:
            return _load(build_name())
        except Exception as e:  # noqa: BLE001 - any build problem means: use the PyTorch path
            last = str(e).strip().splitlines()[-1] if str(e).strip() else ""
            problem = f"the build failed ({type(e).__name__}: {last})"
            warnings.warn(f"attnkit: native kernel unavailable: {problem}; using the PyTorch paths",
                          RuntimeWarning, stacklevel=2)
    _PROBLEM.append(problem)
    return None


def unavailable() -> str | None:
    """None when ``kernel()`` runs here, else why not (building it first if it was never tried)."""
    return None if kernel() is not None else _PROBLEM[0]


@functools.cache
def extension(csrc: Path, prefix: str):
    """Another of attnkit's extensions, built as ``kernel()``'s is: the .cpp files of ``csrc`` compiled with
    these kernels' headers (under ``<prefix>_<digest>``, the digest covering both folders), or None where the
    kernels do not run here or its build failed (a RuntimeWarning says why)."""
    if kernel() is None:
        return None
    try:
        return _load(build_name((Path(csrc),), prefix), (Path(csrc),))
    except Exception as e:  # noqa: BLE001 - any build problem means: use the PyTorch path
        last = str(e).strip().splitlines()[-1] if str(e).strip() else ""
        warnings.warn(f"attnkit: native extension {prefix} unavailable: the build failed ({type(e).__name__}: "
                      f"{last}); using the PyTorch paths", RuntimeWarning, stacklevel=2)
        return None
