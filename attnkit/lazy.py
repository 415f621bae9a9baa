"""A package's names imported from their modules on first use, so that importing the package stays light
(``attnkit.nn.limits`` and ``attnkit.train.config`` are read by the command line without importing torch)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable


def lazy_names(package: str, where: dict[str, tuple[str, ...]]) -> tuple[Callable[[str], object], list[str]]:
    """(``__getattr__``, ``__all__``) for ``package``: each name of ``where`` (module -> its names) comes from its
    module on first use, and any other public name that is a submodule is that submodule (as when the package
    imported them all)."""
    module_of = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str):
        if name in module_of:
            return getattr(importlib.import_module(f".{module_of[name]}", package), name)
        if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}") is not None:
            return importlib.import_module(f".{name}", package)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__, sorted(module_of)
