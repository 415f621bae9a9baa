"""Options of ``attnkit train <task>`` built from frozen config dataclasses: one ``--field-name`` per field.

A field's help line is its ``metadata["help"]`` (the one place it is written; the CLI's formatter adds
the choices and the default). Task modules use these for their model's options, ``attnkit.cli.train``
for TrainConfig and the encoder's TransformerConfig fields.
"""

from __future__ import annotations

import argparse
import typing
from dataclasses import MISSING, fields
from pathlib import Path


def _choices(cls, f):
    if "choices" in f.metadata:
        return list(f.metadata["choices"])
    hint = typing.get_type_hints(cls).get(f.name)
    if typing.get_origin(hint) is typing.Literal:
        return list(typing.get_args(hint))
    return None


def add_config_args(parser: argparse.ArgumentParser, cls, *, defaults: dict | None = None,
                    only: tuple[str, ...] | None = None, prefix: str = "", title: str | None = None) -> None:
    """Add ``--{prefix}{field}`` for the fields of ``cls`` (``only`` restricts them); ``defaults`` override.

    Fields without a plain default (None, containers, nested configs) are left out."""
    defaults = defaults or {}
    group = parser.add_argument_group(title or cls.__name__)
    for f in fields(cls):
        if only is not None and f.name not in only:
            continue
        default = defaults.get(f.name, f.default if f.default is not MISSING else None)
        if default is None or isinstance(default, (dict, list, tuple)) or hasattr(default, "__dataclass_fields__"):
            continue
        flag = "--" + (prefix + f.name).replace("_", "-")
        dest = prefix + f.name
        text = f.metadata.get("help", "").replace("%", "%%")  # argparse formats help with %
        if isinstance(default, bool):
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=default, help=text)
        else:
            group.add_argument(flag, dest=dest, type=type(default), default=default, choices=_choices(cls, f),
                               help=text)


def config_from_args(cls, args: argparse.Namespace, *, prefix: str = "", base=None, **extra):
    """Build ``cls`` from the parsed options (validation happens in the dataclass)."""
    values = {}
    for f in fields(cls):
        if hasattr(args, prefix + f.name):
            values[f.name] = getattr(args, prefix + f.name)
    values.update(extra)
    if base is not None:
        return base.replace(**values) if hasattr(base, "replace") else cls(**{**base.__dict__, **values})
    return cls(**values)


def add_data_args(p: argparse.ArgumentParser, folder: str, download: str) -> None:
    """``--data-dir DIR`` (alias ``--data-root``): the datasets root holding ``folder``; ``--download``."""
    p.add_argument("--data-dir", "--data-root", dest="data_dir", type=Path, default=None, metavar="DIR",
                   help=f"datasets root: the folder holding {folder} (default: $ATTNKIT_DATA, else ../shared/data "
                        "next to the source checkout, else the download cache)")
    p.add_argument("--download", action="store_true", help=download)


def split_item(spec: str, splits: tuple[str, ...] = ("train", "dev", "test")) -> tuple[str, int] | None:
    """``"test:3"`` -> ("test", 3): an example of a dataset split named on the command line; None for
    anything else (a file name). Raises ValueError for a split name with a bad index."""
    name, sep, index = spec.partition(":")
    if not sep or name not in splits:
        return None
    if not index.isdigit():
        raise ValueError(f"predict: {spec!r}: expected {name}:N with N a whole number >= 0")
    return name, int(index)


def add_split_files(p: argparse.ArgumentParser, kind: str, dataset: str, folder: str, download: str, *,
                    test: str) -> None:
    """``--train/--dev/--test FILE`` of ``kind`` files (defaults: ``dataset``'s splits from the datasets
    root; ``test`` says what the test default is), then ``--data-dir`` and ``--download``."""
    p.add_argument("--train", type=Path, default=None, metavar="FILE",
                   help=f"{kind} train file (default: {dataset} train from --data-dir)")
    p.add_argument("--dev", type=Path, default=None, metavar="FILE",
                   help=f"{kind} dev file, for picking the best checkpoint (default: {dataset} dev when --train is "
                        "not given, else none)")
    p.add_argument("--test", type=Path, default=None, metavar="FILE",
                   help=f"{kind} test file with labels, scored at the end (default: {test})")
    add_data_args(p, folder, download)
