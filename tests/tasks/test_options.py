"""``--window``: one parser for every task, its help and default read from the model config's ``window`` field, and
a streaming speech recogniser's own default without a sentinel (``--window 8,8 --streaming`` keeps 8,8)."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from attnkit.cli.main import build_parser
from attnkit.models.asr import STREAMING_WINDOW, AsrConfig
from attnkit.models.speech import SpeechConfig
from attnkit.nn import TransformerConfig
from attnkit.tasks.asr import config_from_args
from attnkit.tasks.options import add_window_arg, parse_window, window_of


def test_parse_window():
    assert parse_window("full") is None and parse_window("none") is None
    assert parse_window("4") == (4, 4) and parse_window("8,2") == (8, 2) and parse_window("16,0") == (16, 0)
    for bad in ("a,b", "1,2,3", "-1", "4,65537", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="expected 'full', 'W' or 'L,R'"):
            parse_window(bad)


@pytest.mark.parametrize("cls, streaming", [(AsrConfig, STREAMING_WINDOW), (SpeechConfig, None)])
def test_the_help_and_default_come_from_the_config_field(cls, streaming):
    f = next(f for f in fields(cls) if f.name == "window")
    p = argparse.ArgumentParser()
    p.add_argument("--streaming", action="store_true")
    add_window_arg(p, cls, streaming=streaming)
    action = next(a for a in p._actions if a.dest == "window")
    default = f"{f.default[0]},{f.default[1]}"
    assert action.help.startswith(f.metadata["help"]) and f"default: {default}" in action.help
    if streaming:
        assert f"with --streaming {streaming[0]},{streaming[1]}" in action.help
    assert window_of(p.parse_args([]), cls, streaming=streaming) == f.default
    assert window_of(p.parse_args(["--window", "3,1"]), cls, streaming=streaming) == (3, 1)
    assert window_of(p.parse_args(["--window", "full"]), cls, streaming=streaming) is None


@pytest.mark.parametrize("argv, window", [([], (8, 8)), (["--streaming"], STREAMING_WINDOW),
                                          (["--streaming", "--window", "8,0"], (8, 0)),
                                          (["--window", "8,8"], (8, 8)), (["--window", "full"], None)])
def test_train_asr_window(argv, window):
    args = build_parser().parse_args(["train", "asr", "--out", "x", *argv])
    assert config_from_args(args, TransformerConfig()).window == window
    assert AsrConfig().window == (8, 8)


def test_an_explicit_window_is_kept_with_streaming():
    """A sentinel swapped 8,8 for 16,0 whenever --streaming was given, even when 8,8 was asked for: now a window
    with right context is refused, as asked, rather than silently replaced."""
    args = build_parser().parse_args(["train", "asr", "--out", "x", "--streaming", "--window", "8,8"])
    with pytest.raises(ValueError, match="`streaming` needs a window with no right context"):
        config_from_args(args, TransformerConfig())


def test_train_speech_window():
    for argv, window in (([], (4, 4)), (["--window", "2"], (2, 2)), (["--window", "full"], None)):
        assert build_parser().parse_args(["train", "speech", "--out", "x", *argv]).window == window
