"""Native CPU kernels, compiled on first use with ``torch.utils.cpp_extension`` (needs a C++ compiler
and ninja; the build is cached under ``~/.cache/torch_extensions``, under a minute the first time).

``window_kernel()`` returns the compiled module of ``csrc/window_attention.cpp`` (exact windowed
attention, forward in float32 / bfloat16 and backward in float32, AVX-512; and, from
``csrc/short_attention.h``, full attention over short sequences, the ``short`` backend), or None when it cannot
run here: no AVX-512, no compiler, or a failed build. Callers then use their pure-PyTorch path,
which is also the reference the tests hold the kernel to. A failed build warns once and says why.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import warnings
from pathlib import Path

import torch

__all__ = ["window_kernel", "lengths_arg", "SOURCE"]

CSRC = Path(__file__).with_name("csrc")
SOURCE = CSRC / "window_attention.cpp"  # includes window_tiles.h


def _name() -> str:
    """Extension name with a digest of every file in csrc/ and of the torch installation compiled
    against: torch's build cache only watches the listed sources (a header change must force a
    rebuild), and two environments sharing one build directory would make ninja rebuild in turn."""
    digest = hashlib.sha256(f"{torch.__version__}|{Path(torch.__file__).resolve().parent}|{_FLAGS}".encode())
    for f in sorted(CSRC.iterdir()):
        if f.suffix in (".cpp", ".h"):
            digest.update(f.name.encode() + f.read_bytes())
    return f"attnkit_window_{digest.hexdigest()[:12]}"


def _staged_source(build_dir: Path) -> Path:
    """Copy csrc/ into the build directory and return the copy of SOURCE. Every checkout with the same
    sources then compiles the same paths, so two clones do not make ninja rebuild for each other."""
    src = build_dir / "src"
    src.mkdir(parents=True, exist_ok=True)
    for f in CSRC.iterdir():
        if f.suffix in (".cpp", ".h") and not (src / f.name).exists():
            tmp = src / f".{f.name}.{os.getpid()}.tmp"
            tmp.write_bytes(f.read_bytes())
            os.replace(tmp, src / f.name)  # atomic: a concurrent process sees the old file or the new one
    return src / SOURCE.name


_FLAGS = ["-O3", "-fopenmp", "-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma"]
log = logging.getLogger("attnkit")


def lengths_arg(lengths: torch.Tensor | None) -> torch.Tensor:
    """Padding lengths as the kernels take them: contiguous int64 on the CPU, or an empty tensor for none."""
    if lengths is None:
        return torch.empty(0, dtype=torch.int64)
    return lengths.to(device="cpu", dtype=torch.int64).reshape(-1).contiguous()


def _build_dir(name: str) -> Path:
    from torch.utils.cpp_extension import _get_build_directory  # torch's own cache location for ``name``

    return Path(_get_build_directory(name, verbose=False))


def _cpu_ok() -> bool:
    try:
        return torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    except Exception:  # noqa: BLE001 - older torch without the query: be safe
        return False


@functools.cache
def window_kernel():
    """The compiled window-attention module, or None (see the module docstring)."""
    if not _cpu_ok():
        return None
    try:
        from torch.utils.cpp_extension import load

        name = _name()
        build_dir = _build_dir(name)
        if not any(build_dir.glob(f"{name}*.so")):
            log.warning("attnkit: compiling the native attention kernel (once per environment, under a minute)")
        source = _staged_source(build_dir)
        return load(name, [str(source)], extra_cflags=_FLAGS, build_directory=str(build_dir), verbose=False)
    except Exception as e:  # noqa: BLE001 - any build problem means: use the PyTorch path
        warnings.warn(f"attnkit: native window-attention kernel unavailable ({type(e).__name__}: "
                      f"{str(e).strip().splitlines()[-1] if str(e).strip() else e}); using the PyTorch path",
                      RuntimeWarning, stacklevel=2)
        return None
