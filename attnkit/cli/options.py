"""Command-line options built from frozen config dataclasses: one ``--field-name`` per field."""

from __future__ import annotations

import argparse
import typing
from dataclasses import MISSING, fields


def _choices(cls, name):
    hint = typing.get_type_hints(cls).get(name)
    if typing.get_origin(hint) is typing.Literal:
        return list(typing.get_args(hint))
    return None


def add_config_args(parser: argparse.ArgumentParser, cls, *, defaults: dict | None = None,
                    only: tuple[str, ...] | None = None, prefix: str = "", title: str | None = None) -> None:
    """Add ``--{prefix}{field}`` for the fields of ``cls`` (``only`` restricts them); ``defaults`` override."""
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
        if isinstance(default, bool):
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=default,
                               help=f"(default {default})")
        else:
            group.add_argument(flag, dest=dest, type=type(default), default=default,
                               choices=_choices(cls, f.name), help=f"(default {default})")


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
