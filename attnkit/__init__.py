"""attnkit: self-attention and Transformers, from the lecture's matrices to fast kernels.

Public face: ``attention``, ``explain``, ``masks``, ``nn``, ``cpu_isa`` (the variant of the native kernels that
runs here: avx512, avx2, neon or generic); ``attnkit.load_pretrained`` loads pretrained
encoders and Marian (opus-mt) folders (once their extra is installed) and trained translation runs.
Every name here is imported on first use, torch included: ``import attnkit`` (and ``attnkit --help``) stays light.
"""

__version__ = "0.1.0"

__all__ = ["attention", "explain", "masks", "functional", "nn", "available_backends", "load_pretrained",
           "cpu_isa", "__version__"]


_LAZY = ("functional", "masks", "nn", "models", "viz", "pretrained", "data", "train")  # imported on first use
_FUNCTIONAL = ("attention", "explain", "available_backends")  # attnkit.functional's, imported on first use


def __getattr__(name):  # lazy: keep `import attnkit` light
    import importlib

    if name in _LAZY:
        return importlib.import_module(f"attnkit.{name}")
    if name in _FUNCTIONAL:
        return getattr(importlib.import_module("attnkit.functional"), name)
    if name == "load_pretrained":
        from .load import load_pretrained

        return load_pretrained
    if name == "cpu_isa":
        from .functional.native import cpu_isa

        return cpu_isa
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")
