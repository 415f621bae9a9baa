"""Data files with bytes that are not UTF-8: one error naming the file, the line and the column."""

from __future__ import annotations

import gzip

import pytest

from attnkit.data.conllu import read_conllu
from attnkit.data.sst2 import read_tsv
from attnkit.data.text import utf8_lines


def test_latin1_tsv_names_file_and_line(tmp_path):
    p = tmp_path / "train.tsv"
    p.write_bytes(b"sentence\tlabel\ngood film\t1\n" + "caf\u00e9 film\t0\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"^.*train\.tsv:3: not UTF-8 text \(byte 0xe9 at column 4\)$"):
        read_tsv(p)


def test_latin1_conllu_far_into_a_gzip_file_names_the_right_line(tmp_path):
    """Far past the first decoding chunk, so a text stream's own error could not say the line."""
    sent = "1\tI\tI\tPRON\t_\t_\t0\troot\t_\t_\n\n"
    data = (sent * 2000).encode() + "1\tNa\u00efve\tx\tADJ\t_\t_\t0\troot\t_\t_\n".encode("latin-1")
    p = tmp_path / "t.conllu.gz"
    with gzip.open(p, "wb") as f:
        f.write(data)
    with pytest.raises(ValueError, match=r"t\.conllu\.gz:4001: not UTF-8 text \(byte 0xef at column 5\)"):
        read_conllu(p)


def test_lines_drop_a_bom_and_line_ends(tmp_path):
    p = tmp_path / "x.txt"
    p.write_bytes(b"\xef\xbb\xbfone\r\ntwo\n")
    assert list(utf8_lines(p)) == [(1, "one"), (2, "two")]
