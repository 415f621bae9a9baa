"""The dtypes a model runs in, by name: the one table every ``--dtype`` option, ``load_pretrained`` and ``engine_for``
read.

Each row says what a dtype is in words (the command line's help), the dtype the model's weights load in (int8:
float32, quantised by the engine: ``quant.py``), which engines run it (``select.ENGINES``' kinds) and why the
others do not, and whether ``--dtype`` offers it. float16 and float64 are Python's only: no native kernel runs
float16 (the engines run PyTorch's own operations), and float64 runs on the model's own modules, a reference.

A value is checked once, where the user gave it: on the command line by ``--dtype``'s choices, in Python by
``resolve(value, where)`` in the function that took ``dtype=``; what it returns, a ``DType``, passes through every
function below unchecked. Importing this module imports no torch (the command line builds its options from it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DType", "DTYPES", "ENGINES", "OPTION", "resolve", "of_torch"]

ENGINES = ("seq2seq", "nat", "bert", "asr")  # every engine kind (``architectures.ARCHITECTURES``' names)


@dataclass(frozen=True)
class DType:
    """One row of the table (see the module doc). ``name`` is what the user types and torch's name of the dtype;
    ``loads`` the dtype the weights load in; ``engines`` the engine kinds that run it, ``why_not`` why the others
    do not; ``option`` whether ``--dtype`` offers it; ``says`` what it does, in words."""

    name: str
    loads: str
    says: str
    engines: tuple[str, ...] = ENGINES
    why_not: str = ""
    option: bool = True

    @property
    def torch(self):
        """The torch dtype of this name (``torch.int8`` for int8: int8 weights, float32 activations)."""
        import torch

        return getattr(torch, self.name)

    @property
    def weights(self):
        """The torch dtype the model's weights load in."""
        import torch

        return getattr(torch, self.loads)

    @property
    def quantized(self) -> bool:
        """Whether the engine quantises the weights it reads (int8: from float32)."""
        return self.loads != self.name

    def __repr__(self) -> str:
        return f"DType({self.name!r})"


DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("float32", "float32", "as trained"),
    DType("bfloat16", "bfloat16", "half the bytes read per step, faster on CPUs with AVX512-BF16"),
    DType("int8", "float32", "the layers' weights and rows in int8, docs/int8.md"),
    DType("float16", "float16", "PyTorch's own float16 operations (no native kernel)", option=False),
    DType("float64", "float64", "the model's own modules, a reference for checks", engines=(),
          why_not="no engine runs float64; the model's own modules do", option=False),
)}
OPTION = tuple(name for name, d in DTYPES.items() if d.option)  # ``--dtype``'s choices


def resolve(value, where: str, *, fast: bool = True) -> DType:
    """A ``dtype=`` argument (a name of the table, its torch dtype, or a ``DType``) -> its row; ValueError naming
    ``where`` (the function the user called), the argument as given and the choices. ``fast``: a loader's; False
    refuses the dtypes only an engine runs (int8)."""
    row = value if isinstance(value, DType) else DTYPES.get(value) if isinstance(value, str) else of_torch(value)
    if row is None:
        raise ValueError(f"{where}: dtype={value!r} is not one of {', '.join(DTYPES)} (a name, or its torch dtype)")
    if row.quantized and not fast:
        raise ValueError(f"{where}: dtype={value!r} runs on the inference engine only; not with fast=False")
    return row


def of_torch(dtype) -> DType | None:
    """The row of a torch dtype, or None."""
    return next((d for d in DTYPES.values() if str(dtype) == f"torch.{d.name}"), None)
