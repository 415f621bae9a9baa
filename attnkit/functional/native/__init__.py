"""attnkit's kernels' native extension, ``attnkit_native``: C++ kernels for every CPU, compiled on first use.

One source, built per instruction-set variant (``isa.py`` knows the CPU and picks one: avx512, avx2, neon,
generic; ``ATTNKIT_CPU_ISA`` forces a lower one). The sources are in ``csrc/``, by concept: ``vec.h`` (the
portable vector layer they are written over: 16 float32 lanes, masks, exp) with ``vec_mem.h`` (its float32 and
bfloat16 loads and stores, prefetches) and ``vec_int8.h`` (its int8 side: exact dot products of int8 groups),
``window_attention.h`` (attention over a key window: backends ``tiled``
and ``local``), ``short_attention.h`` (full attention over short sequences: backend ``short``),
``add_norm.h`` (LayerNorm of a residual sum: ``functional.norm``), ``small_linear.h`` and ``panel_linear.h``
(linear layers over a few rows: ``inference.packed``), ``int8_quant.h`` and ``int8_linear.h`` (int8 linear
layers: ``inference.quant_linear``), ``best_tokens.h`` (each row's best allowed token:
``functional.tokens``), their checked entry points ``attention_ops.h``, ``norm_ops.h``, ``linear_ops.h``,
``int8_ops.h`` and ``best_tokens.h`` (every device, dtype, shape, stride and length a kernel relies on is a
TORCH_CHECK there), and ``module.cpp``, the one translation unit, which binds them (torch's headers cost most of
the build, so they are parsed once). Whole layers made of these entry points are the inference layer's
(``attnkit/inference/native``): another extension, built the same way by ``extension`` from its own sources and
these headers.

``kernel()`` returns the compiled module of the selected variant, or None where none builds (no compiler:
``unavailable()`` says why). A variant whose build fails falls back to the next lower one, said once on the
``attnkit`` logger; ``variant()`` is the one that runs. Callers without a module use their PyTorch paths,
which are also the references the tests hold the kernels to. ``torch.utils.cpp_extension`` builds it (ninja,
about a minute) into torch's extension cache (``~/.cache/torch_extensions``) under a name that holds the
variant and hashes every source and everything the build command holds (torch's include and library paths
as torch passes them to the compiler, flags, compiler), so two environments or variants never rebuild each
other's build. Each variant's C++ lives in its own namespace (``attnkit_<variant>``), so two variants load
side by side in one process (the tests run every variant the CPU has). Every build is
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

from . import isa

__all__ = ["kernel", "unavailable", "build_name", "lengths_arg", "CSRC", "extension", "cpu_isa", "flags", "isa"]

CSRC = Path(__file__).with_name("csrc")
COMMON_FLAGS = ("-O3", "-fopenmp")
SLOW_LOAD_S = 3.0  # an existing build loads in well under a second; longer means it is being rebuilt
log = logging.getLogger("attnkit")


def _sources(dirs: tuple[Path, ...] = ()) -> list[Path]:
    """The .cpp and .h files of csrc/ and of ``dirs`` (another extension's own sources)."""
    return [f for d in (CSRC, *dirs) for f in sorted(d.iterdir()) if f.suffix in (".cpp", ".h")]


def flags(variant: str) -> list[str]:
    """The compiler flags of one variant: its instruction sets and the namespace its C++ is built in."""
    return [*COMMON_FLAGS, *isa.FLAGS[variant], f"-DATTNKIT_VARIANT=attnkit_{variant}"]


def build_name(dirs: tuple[Path, ...] = (), prefix: str = "attnkit_native", variant: str | None = None) -> str:
    """``<prefix>_<variant>_<digest>``: the digest covers every file in csrc/ (and ``dirs``; torch's build cache only
    watches the .cpp files it is given) and the build command's inputs exactly as torch writes them, unresolved
    paths included (a symlinked environment is another build, not a rebuild of this one)."""
    from torch.utils.cpp_extension import include_paths, library_paths

    variant = variant or isa.selected()
    parts = [torch.__version__, *include_paths(), *library_paths(), sysconfig.get_paths()["include"],
             os.environ.get("CXX", "c++"), *flags(variant)]
    digest = hashlib.sha256("|".join(parts).encode())
    for f in _sources(dirs):
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return f"{prefix}_{variant}_{digest.hexdigest()[:12]}"


def lengths_arg(lengths: torch.Tensor | None) -> torch.Tensor:
    """Padding lengths as the kernels take them: contiguous int64 on the CPU, or an empty tensor for none."""
    if lengths is None:
        return torch.empty(0, dtype=torch.int64)
    return lengths.to(device="cpu", dtype=torch.int64).reshape(-1).contiguous()


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


def _load(name: str, variant: str, dirs: tuple[Path, ...] = ()):
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
        module = load(name, _staged_sources(build_dir, dirs), extra_cflags=flags(variant),
                      build_directory=str(build_dir), verbose=False)
    finally:
        if timer is not None:
            timer.cancel()
    if _stamp(library) != before:
        log.warning("attnkit: built the native kernel %s in %.1f s", name, time.monotonic() - start)
    return module


_PROBLEMS: dict[str, str] = {}  # variant -> why none of it and the variants below it builds


def _built(prefix: str, wanted: str, dirs: tuple[Path, ...] = ()):
    """(variant, module) of the first of ``wanted`` and the variants below it that builds, or (None, None);
    each failure said once on the ``attnkit`` logger."""
    v: str | None = wanted
    while v is not None:
        try:
            return v, _load(build_name(dirs, prefix, v), v, dirs)
        except Exception as e:  # noqa: BLE001 - any build problem means: the next variant down
            last = str(e).strip().splitlines()[-1] if str(e).strip() else ""
            problem = f"the {v} build of {prefix} failed ({type(e).__name__}: {last})"
            down = isa.lower(v)
            log.warning("attnkit: %s; %s", problem, f"using the {down} variant" if down else "using the PyTorch paths")
            _PROBLEMS[wanted] = problem
            v = down
    warnings.warn(f"attnkit: native kernel unavailable: {_PROBLEMS[wanted]}; using the PyTorch paths",
                  RuntimeWarning, stacklevel=3)
    return None, None


@functools.cache
def _kernel(wanted: str):
    return _built("attnkit_native", wanted)


@functools.cache
def _selected(env: str) -> str:
    """``isa.selected()`` for this value of ATTNKIT_CPU_ISA (cached: the kernels are asked for on every call)."""
    return isa.selected()


def _wanted(variant: str | None) -> str:
    return variant or _selected(os.environ.get(isa.ENV, ""))


def kernel(variant: str | None = None):
    """The compiled ``attnkit_native`` module of ``variant`` (default: ``isa.selected()``, the best this CPU runs
    or ``ATTNKIT_CPU_ISA``'s), or of the next lower variant that builds, or None; built once per process."""
    return _kernel(_wanted(variant))[1]


def cpu_isa(variant: str | None = None) -> str | None:
    """The variant that runs when ``variant`` (default: the selected one) is asked for, or None where none
    builds: ``attnkit.cpu_isa()``."""
    return _kernel(_wanted(variant))[0]


def unavailable(variant: str | None = None) -> str | None:
    """None when ``kernel(variant)`` runs here, else why not (building it first if it was never tried)."""
    wanted = _wanted(variant)
    return None if kernel(wanted) is not None else _PROBLEMS.get(wanted, "no variant of the kernels built")


@functools.cache
def _extension(csrc: Path, prefix: str, variant: str):
    return _built(prefix, variant, (Path(csrc),))[1]


def extension(csrc: Path, prefix: str, variant: str | None = None):
    """Another of attnkit's extensions, built as ``kernel()``'s is: the .cpp files of ``csrc`` compiled with
    these kernels' headers (under ``<prefix>_<variant>_<digest>``, the digest covering both folders), for the
    variant ``kernel(variant)`` runs, or None where no kernel runs here or its build failed (said once)."""
    runs = cpu_isa(variant)
    return None if runs is None else _extension(Path(csrc), prefix, runs)
