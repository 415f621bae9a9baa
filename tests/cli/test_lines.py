"""Issue 43, item 10: one rule for the lines of a file and of stdin, and one output row per input line."""

from __future__ import annotations

import argparse
import io
import sys

import pytest

from attnkit.cli import pretrained
from attnkit.cli.options import read_lines, split_lines

CASES = [
    (b"a\rb\nc", ["a\rb", "c"]),  # a lone \r is part of its line
    (b"a\r\nb\r\n", ["a", "b"]),  # Windows line ends
    (b"one\n\nthree\n", ["one", "", "three"]),  # an empty line is a line
    (b"\n", [""]),
    (b"", []),
    (b"\xef\xbb\xbfBOM first\nsecond", ["BOM first", "second"]),
    (b"x\x0by\x0cz\xe2\x80\xa8w\n", ["x\x0by\x0cz\u2028w"]),  # only \n ends a line (str.splitlines splits these)
]


class _Stdin:
    """A stdin with bytes, as a pipe gives."""

    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


@pytest.mark.parametrize("data,lines", CASES)
def test_a_file_and_stdin_give_the_same_lines(data, lines, tmp_path, monkeypatch):
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    assert split_lines(data, "x") == lines
    assert read_lines(path) == lines
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    assert read_lines("-") == lines
    monkeypatch.setattr(sys, "stdin", io.StringIO(data.decode("utf-8")))  # a text stream (tests replace stdin)
    assert read_lines("-") == lines


def test_the_reported_lone_carriage_return_gives_two_lines_both_ways(tmp_path, monkeypatch):
    data = b"Ein Hund.\rEine Katze.\nEin Haus.\n"  # the report: 3 outputs from stdin, 2 from --file
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    assert read_lines("-") == read_lines(path) == ["Ein Hund.\rEine Katze.", "Ein Haus."]


def test_not_utf8_names_the_line_on_both_paths(tmp_path, monkeypatch):
    data = b"ok\n\xff bad\n"
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=r"in\.txt:2: not UTF-8 text \(byte 0xff at column 1\)"):
        read_lines(path)
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    with pytest.raises(ValueError, match=r"^<stdin>:2: not UTF-8 text \(byte 0xff at column 1\)$"):
        read_lines("-")


def test_embed_reads_one_text_per_line_empty_ones_included(tmp_path, monkeypatch):
    """Row i of embed's output is line i of its input, from --file and from stdin alike (as ``embed ""``
    embeds the empty string)."""
    data = b"first\n\nthird\r\nfourth\rstill fourth\n"
    path = tmp_path / "texts.txt"
    path.write_bytes(data)
    want = ["first", "", "third", "fourth\rstill fourth"]
    assert pretrained._read_texts(argparse.Namespace(texts=[], file=path)) == want
    assert pretrained._read_texts(argparse.Namespace(texts=["arg"], file=path)) == ["arg", *want]
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    assert pretrained._read_texts(argparse.Namespace(texts=[], file=None)) == want
    assert pretrained._read_texts(argparse.Namespace(texts=[""], file=None)) == [""]
