"""Options of ``attnkit train <task>`` built from frozen config dataclasses: one ``--field-name`` per field.

A field's help line is its ``metadata["help"]`` (the one place it is written; the CLI's formatter adds
the range, the choices and the default). A numeric field's ``metadata["range"]`` (``attnkit.nn.limits``)
is its option's type: a value outside it is refused while parsing, in one line naming the option; a
numeric field without one takes any finite number or any 64-bit integer. Task modules use these for their
model's options, ``attnkit.cli.train`` for TrainConfig and the encoder's TransformerConfig fields.
"""

from __future__ import annotations

import argparse
import typing
from dataclasses import MISSING, fields
from pathlib import Path

from ...nn.limits import Range, floats, ints

_ANY = {int: ints(-(2**63), 2**63 - 1), float: floats(-1e300, 1e300)}  # fields without a stated range
LIMIT = ints(1, 10**9)  # --limit N: the first N examples of a file
PROBABILITY = floats(0, 1, open_high=True)  # dropout rates


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
            group.add_argument(flag, dest=dest, type=_option_type(f, default), default=default,
                               choices=_choices(cls, f), help=text)


def _option_type(f, default):
    """The field's ``Range`` (or any finite number / 64-bit integer) for numbers, else the default's type."""
    kind = type(default)
    if kind not in (int, float):
        return kind
    rng = f.metadata.get("range", _ANY[kind])
    if not isinstance(rng, Range):
        raise TypeError(f"{f.name}: metadata['range'] must be an attnkit.nn.limits.Range, got {rng!r}")
    return rng


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


def parse_window(text: str) -> tuple[int, int] | None:
    """``--window``: 'full' -> None (every step); 'L,R' -> (L, R); 'W' -> (W, W)."""
    if text in ("full", "none"):
        return None
    try:
        parts = [int(v) for v in text.split(",")]
    except ValueError:
        parts = []
    parts = parts * 2 if len(parts) == 1 else parts
    if len(parts) != 2 or min(parts) < 0 or max(parts) > 65536:
        raise argparse.ArgumentTypeError(f"expected 'full', 'W' or 'L,R' with W, L, R in [0, 65536], got {text!r}")
    return parts[0], parts[1]


def window_text(window: tuple[int, int] | None) -> str:
    """A window as ``--window`` takes it: ``8,8`` or ``full``."""
    return "full" if window is None else f"{window[0]},{window[1]}"


def add_window_arg(p: argparse.ArgumentParser, cls, *, streaming: tuple[int, int] | None = None) -> None:
    """``--window L,R`` from the ``window`` field of the model config ``cls``: its help and its default. A model
    with a streaming variant states that variant's window too (``streaming``): then ``--window`` not given is
    absent from the parsed options, and ``window_of`` picks the default that fits."""
    f = next(f for f in fields(cls) if f.name == "window")
    default = f"default: {window_text(f.default)}" + (f"; with --streaming {window_text(streaming)}" if streaming
                                                        else "")
    p.add_argument("--window", type=parse_window, default=argparse.SUPPRESS if streaming else f.default,
                   metavar="L,R", help=f"{f.metadata['help']}; given as 'L,R', 'W' for W,W, or 'full' "
                                       f"({default})".replace("%", "%%"))


def window_of(args: argparse.Namespace, cls, *, streaming: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The window ``--window`` gave, else ``cls``'s default (``streaming``'s for a streaming model)."""
    if "window" in vars(args):
        return args.window
    if streaming is not None and getattr(args, "streaming", False):
        return streaming
    return next(f for f in fields(cls) if f.name == "window").default


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


ATTENTION_WORDS = 1024  # predict --attention: the longest input whose maps are drawn (L x L per head and layer)


def attention_words(tokens, k: int) -> None:
    """A one-line error when input ``k`` (0-based) is too long for ``predict --attention``'s maps: their weights
    are tokens^2 per head and layer, and a picture of more than ``ATTENTION_WORDS`` rows is unreadable anyway."""
    if len(tokens) > ATTENTION_WORDS:
        raise ValueError(f"predict: --attention draws inputs of up to {ATTENTION_WORDS} tokens; input {k + 1} has "
                         f"{len(tokens):,} (without --attention it is predicted as it is)")
