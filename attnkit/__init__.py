"""attnkit: self-attention and Transformers, from the lecture's matrices to fast kernels.

Public face: ``attention``, ``explain``, ``masks``, ``nn``; ``attnkit.load_pretrained`` loads pretrained
encoders (once their extra is installed) and trained translation runs.
"""

from . import functional, masks
from .functional import attention, available_backends, explain

__version__ = "0.1.0"

__all__ = ["attention", "explain", "masks", "functional", "nn", "available_backends", "load_pretrained",
           "__version__"]


def __getattr__(name):  # lazy: keep `import attnkit` light
    if name == "nn":
        import importlib

        return importlib.import_module("attnkit.nn")
    if name == "load_pretrained":
        from .load import load_pretrained

        return load_pretrained
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")
