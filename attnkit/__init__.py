"""attnkit: self-attention and Transformers, from the lecture's matrices to fast kernels.

Public face: ``attention``, ``explain``, ``masks``, ``nn``; pretrained loading lives in
``attnkit.load_pretrained`` once its extra is installed. ``attnkit.nn``, ``.models``, ``.viz``,
``.pretrained``, ``.data`` and ``.train`` are imported on first use.
"""

from . import functional, masks
from .functional import attention, available_backends, explain

__version__ = "0.1.0"

__all__ = ["attention", "explain", "masks", "functional", "nn", "available_backends", "load_pretrained",
           "__version__"]


_LAZY = ("nn", "models", "viz", "pretrained", "data", "train")  # subpackages imported on first use


def __getattr__(name):  # lazy: keep `import attnkit` light
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"attnkit.{name}")
    if name == "load_pretrained":
        from .pretrained import load_pretrained

        return load_pretrained
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")
