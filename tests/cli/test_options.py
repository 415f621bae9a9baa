"""``attnkit.cli.options``: a mistyped option is refused by its own sub-command with that command's usage
line and the closest option; ``--threads`` of every command that runs a model, one stated default; ``--dtype``
of every command, its choices and words from the one table of dtypes."""

import argparse

import pytest
import torch

from attnkit.cli import options
from attnkit.cli.main import build_parser, main
from attnkit.inference.dtypes import DTYPES, OPTION
from tests.cli.test_help import ALL


def refused(argv, capsys) -> list[str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()


@pytest.mark.parametrize("argv, usage, error", [
    (["train", "tagger", "--max-stesp", "30"], "usage: attnkit train tagger --out DIR [options]",
     "attnkit train tagger: error: unrecognized argument: --max-stesp; did you mean --max-steps? "
     "(see attnkit train tagger --help)"),
    (["train", "tagger", "--out", "R", "--max-stesp=30"], "usage: attnkit train tagger --out DIR [options]",
     "attnkit train tagger: error: unrecognized argument: --max-stesp=30; did you mean --max-steps? "
     "(see attnkit train tagger --help)"),
    (["lecture", "--output", "x"], "usage: attnkit lecture [options]",
     "attnkit lecture: error: unrecognized argument: --output; did you mean --out? (see attnkit lecture --help)"),
    (["predict", "RUN", "text", "--atention", "d"], "usage: attnkit predict RUN INPUT [INPUT ...] [options]",
     "attnkit predict: error: unrecognized argument: --atention; did you mean --attention? "
     "(see attnkit predict --help)"),
    (["lecture", "extra"], "usage: attnkit lecture [options]",
     "attnkit lecture: error: unrecognized argument: extra (see attnkit lecture --help)"),
    (["--verison"], "usage: attnkit COMMAND [options]",
     "attnkit: error: unrecognized argument: --verison; did you mean --version? (see attnkit --help)"),
])
def test_a_typo_is_refused_by_its_command_with_the_closest_option(argv, usage, error, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert refused(argv, capsys) == [usage, error]
    assert list(tmp_path.iterdir()) == []  # nothing ran


def test_abbreviations_and_values_are_not_typos(capsys):
    args = build_parser().parse_args(["train", "tagger", "--out", "R", "--max-st", "5", "--threads", "1"])
    assert args.max_steps == 5 and args.threads == 1  # a unique prefix is argparse's abbreviation
    args = build_parser().parse_args(["predict", "RUN", "--", "--not-an-option"])
    assert args.inputs == ["--not-an-option"]
    lines = refused(["train", "tagger", "--out", "R", "--max", "5"], capsys)  # ambiguous: argparse's own line
    assert len(lines) == 1 and "ambiguous option: --max could match" in lines[0]


@pytest.mark.machine_threads
@pytest.mark.parametrize("path", [["predict", "RUN", "x"], ["evaluate", "RUN"], ["attend", "x"], ["embed"],
                                  ["similarity", "a", "b"], ["translate", "RUN", "x"],
                                  ["train", "tagger", "--out", "R"]])
def test_every_command_that_runs_a_model_takes_threads(path, capsys):
    parser = build_parser()
    assert parser.parse_args(path).threads is None  # default: options.default_threads()
    assert parser.parse_args([*path, "--threads", "3"]).threads == 3
    with pytest.raises(SystemExit):
        parser.parse_args([*(path[:2] if path[0] == "train" else path[:1]), "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: this machine's cores" in text and f"{options.default_threads()} here" in text


@pytest.mark.machine_threads
def test_default_threads_are_the_cores_capped_and_shared(monkeypatch):
    monkeypatch.setattr(options.os, "sched_getaffinity", lambda pid: set(range(32)))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert options.default_threads() == options.THREADS_CAP
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setattr(options.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert options.default_threads() == 1  # 3 cores, 2 torchrun processes
    monkeypatch.setattr(options.os, "sched_getaffinity", lambda pid: {0})
    assert options.default_threads() == 1
    before = torch.get_num_threads()
    try:
        assert options.set_threads(argparse.Namespace(threads=2)) == 2
        assert options.set_threads(argparse.Namespace(threads=None)) == 1  # the default: one core here
        assert options.set_threads(argparse.Namespace(threads=0)) == 1  # 0: torch's choice, untouched
    finally:
        torch.set_num_threads(before)


def test_every_dtype_option_reads_the_one_table():
    found = [(path, a) for path, parser in ALL for a in parser._actions if "--dtype" in a.option_strings]
    assert {" ".join(p) for p, _ in found} == {"embed", "similarity", "evaluate", "translate"}
    assert OPTION == ("float32", "bfloat16", "int8")  # float16 and float64: Python's only (the table says why)
    for path, action in found:
        assert tuple(action.choices) == OPTION, path
        assert all(f"{name}: {DTYPES[name].says}" in action.help for name in OPTION), (path, action.help)


@pytest.mark.parametrize("argv", [["translate", "RUN", "x", "--dtype", "int4"], ["evaluate", "RUN", "--dtype", "fp8"],
                                  ["embed", "x", "--dtype", "float16"]])
def test_a_dtype_not_offered_is_refused_in_the_options_words(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (line,) = refused(argv, capsys)
    assert line.startswith(f"attnkit {argv[0]}: error: argument --dtype: invalid choice: '{argv[-1]}' (choose from ")
    assert all(name in line for name in OPTION) and "dtype=" not in line  # the option, not Python's argument
    assert list(tmp_path.iterdir()) == []  # nothing ran
