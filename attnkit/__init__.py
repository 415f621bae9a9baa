"""attnkit: self-attention and Transformers, from the lecture's matrices to fast kernels.

Public face: ``attention``, ``explain``, ``masks``, ``nn``, ``cpu_isa`` (the variant of the native kernels that
runs here: avx512, avx2, neon or generic); ``attnkit.load_pretrained`` loads pretrained
encoders and Marian (opus-mt) folders (once their extra is installed) and trained translation runs.
``attnkit.nn``, ``.models``, ``.viz``, ``.pretrained``, ``.data`` and ``.train`` are imported on first use.
"""

from . import functional, masks
from .functional import attention, available_backends, explain
from .functional.native import cpu_isa

__version__ = "0.1.0"

__all__ = ["attention", "explain", "masks", "functional", "nn", "available_backends", "load_pretrained",
           "cpu_isa", "__version__"]


_LAZY = ("nn", "models", "viz", "pretrained", "data", "train")  # subpackages imported on first use


def __getattr__(name):  # lazy: keep `import attnkit` light
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"attnkit.{name}")
    if name == "load_pretrained":
        from .load import load_pretrained

        return load_pretrained
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")
