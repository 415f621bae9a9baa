"""``attnkit experiment {data-size,rnn,positions,speakers} --out DIR``: the self-attention lecture's three claims,
and speech recognition of an unheard voice, measured.

    attnkit experiment data-size --out runs/claims/data-size   # CNN vs self-attention by training-set size (MNIST)
    attnkit experiment rnn --out runs/claims/rnn               # GRU / LSTM vs self-attention: distance, time per step
    attnkit experiment positions --out runs/claims/positions   # positional encodings beyond the training length
    attnkit experiment speakers --out runs/claims/speakers     # train asr leaving each FSDD speaker out in turn

Each writes a figure (PNG), a table (Markdown) and ``results.jsonl`` (one row per trained model) into DIR, and
``run.json`` (config, machine, load). ``--quick``: tiny sizes, a check that the pipeline runs. Running again
into the same DIR with the same settings skips the runs already in ``results.jsonl``. Every option's default is
the full experiment's; with ``--quick`` the options not given take the quick values.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import shlex
import sys
import time
import typing
from dataclasses import MISSING, fields, replace
from pathlib import Path

from ..nn.limits import Range, floats, ints
from .options import out_path

EXPERIMENTS = {
    # name: (module under attnkit.experiments, what it measures)
    "data-size": ("data_size", "CNN vs self-attention (ViT patches, pixels in a window) by MNIST training-set size"),
    "rnn": ("rnn", "GRU / LSTM vs self-attention: recall accuracy by distance, time per training step by length"),
    "positions": ("positions", "positional encodings trained up to length 64, tested at 64 to 512"),
    "speakers": ("speakers", "leave one speaker out: attnkit train asr on every FSDD speaker but one, digit errors "
                             "on that one, each speaker in turn"),
}
DATA = {"data-size": "mnist/", "speakers": "fsdd/"}  # the experiments that read a data set, and its folder


def _module(name: str):
    """The experiment's module (it imports torch): what runs it."""
    return importlib.import_module(f"attnkit.experiments.{EXPERIMENTS[name][0]}")


def _configs(name: str):
    """The experiment's config module (``attnkit.experiments.configs``, without torch): its config and ``QUICK``."""
    return importlib.import_module(f"attnkit.experiments.configs.{EXPERIMENTS[name][0]}")


def _config_class(name: str):
    mod = _configs(name)
    return next(getattr(mod, a) for a in mod.__all__ if a.endswith("Config"))


def _description(name: str) -> str:
    """The experiment module's docstring, read from its source: importing it would import torch for ``--help``."""
    spec = importlib.util.find_spec(f"attnkit.experiments.{EXPERIMENTS[name][0]}")
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""


def _shown(value) -> str:
    if isinstance(value, str) and not value:
        return "none"
    return ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)


ITEMS = ints(0, 2**31 - 1)  # the items of a list option whose field states no range


def _once(values: tuple, text: str) -> tuple:
    """``values`` if none is repeated (a repeat would train the same models again and add their rows again)."""
    twice = next((v for k, v in enumerate(values) if v in values[:k]), None)
    if twice is not None:
        raise argparse.ArgumentTypeError(f"{twice!r} is given twice in {text[:80]!r}; give each value once")
    return values


def _list_type(f, item_choices):
    def parse(text: str):
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"a comma-separated list expected, got {text!r}")
        if item_choices is not None:
            bad = [t for t in items if t not in item_choices]
            if bad:
                raise argparse.ArgumentTypeError(f"{bad[0]!r} is not one of {', '.join(item_choices)}")
            return _once(tuple(items), text)
        rng = f.metadata.get("range", ITEMS)  # each item in the field's range
        try:
            values = tuple(rng.check(int(t), "each item") for t in items)
        except ValueError:
            raise argparse.ArgumentTypeError(f"comma-separated whole numbers, each {rng.text()}, expected, got "
                                             f"{text!r}") from None
        return _once(values, text)

    parse.__name__ = "list"
    return parse


def _add_config_options(p: argparse.ArgumentParser, cls, quick) -> None:
    """``--field-name`` for every field of ``cls``; not given = the full (or, with --quick, the quick) value."""
    group = p.add_argument_group(f"{cls.__name__} (the experiment's settings)")
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        default = f.default if f.default is not MISSING else f.default_factory()
        text = f.metadata.get("help", "").replace("%", "%%")
        choices = f.metadata.get("choices")
        if isinstance(default, tuple):
            kind = _list_type(f, choices)
            extra = f"; comma-separated, of: {', '.join(choices)}" if choices else "; comma-separated"
        elif isinstance(default, bool):
            kind, extra = None, ""
        else:
            kind = f.metadata.get("range") or hints[f.name]
            extra = f"; {kind.text()}" if isinstance(kind, Range) else ""
            if choices:
                kind, extra = type(default), f"; choices: {', '.join(map(str, choices))}"
        flag = "--" + f.name.replace("_", "-")
        help_text = f"{text} (default: {_shown(default)}; --quick: {_shown(getattr(quick, f.name))}{extra})"
        if kind is None:
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                               help=help_text)
        else:
            group.add_argument(flag, dest=f.name, type=kind, default=argparse.SUPPRESS, help=help_text,
                               choices=list(choices) if choices and not isinstance(default, tuple) else None,
                               metavar=f.name.upper())


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="the self-attention lecture's claims measured: data-size, rnn, positions; "
                                          "and speakers, speech recognition of a voice never heard (figure, table, "
                                          "results.jsonl)", description=__doc__)
    esub = p.add_subparsers(dest="experiment", metavar="EXPERIMENT")
    esub.required = True
    for name, (_, what) in EXPERIMENTS.items():
        configs, cls = _configs(name), _config_class(name)
        e = esub.add_parser(name, help=what, description=_description(name))
        e.add_argument("--out", type=out_path, default=Path(f"runs/claims/{name}"),
                       help="folder for the figure, the table, results.jsonl and run.json "
                            f"(default runs/claims/{name})")
        e.add_argument("--quick", action="store_true", help="tiny sizes and few steps: checks the pipeline in minutes")
        e.add_argument("--jobs", type=ints(1, 1024), default=1,
                       help="worker processes training models side by side, an integer in [1, 1024] (default 1: "
                            "one after another in this process); the numbers do not depend on it")
        e.add_argument("--threads", type=ints(1, 1024), default=None,
                       help="torch threads of each process, an integer in [1, 1024] (default: the cores / --jobs)")
        e.add_argument("--max-minutes", type=floats(0, 10**5, open_low=True), default=None, metavar="M",
                       help="start no run after M minutes (those under way finish; the figure and table show what "
                            "is done); the same command again adds the rest (default: no limit)")
        if name in DATA:
            e.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                           help=f"datasets root holding {DATA[name]} (default: $ATTNKIT_DATA, else ../shared/data next "
                                "to the source checkout, else the download cache)")
        _add_config_options(e, cls, configs.QUICK)
        e.set_defaults(func=run, experiment_name=name)


def run(args) -> int:
    import torch

    from ..experiments.runner import load_average

    name = args.experiment_name
    mod, cls = _module(name), _config_class(name)
    given = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
    config = replace(_configs(name).QUICK if args.quick else cls(), **given)
    import os

    threads = args.threads or max(1, (os.cpu_count() or 1) // args.jobs)
    torch.set_num_threads(threads)
    command = shlex.join(["attnkit", "experiment", *sys.argv[2:]]) if sys.argv[1:2] == ["experiment"] else None
    print(f"attnkit experiment {name}{' (quick)' if args.quick else ''}: {args.jobs} process(es) of {threads} torch "
          f"thread(s), load average {load_average()}, writing {args.out}", flush=True)
    t0 = time.perf_counter()
    extra = {"data_dir": args.data_dir} if name in DATA else {}
    res = mod.run(args.out, config, command=command, workers=args.jobs, threads=threads,
                  max_minutes=args.max_minutes, **extra)
    print()
    print(res["table"])
    print()
    for line in res["verdict"]:
        print(line)
    for line in res.get("chance", []):  # the chance level, and a quick run's results within noise of it
        print(line)
    print(f"\nwall time {(time.perf_counter() - t0) / 60:.1f} min; load average {load_average()}")
    print(f"wrote {res['figure']}, {res['markdown']} and {Path(args.out) / 'results.jsonl'}")
    left = json.loads((Path(args.out) / "run.json").read_text(encoding="utf-8")).get("jobs_left")
    if left:
        print(f"incomplete: --max-minutes {args.max_minutes:g} passed with {left} run(s) still to make; run the same "
              "command again to add them")
    return 0
