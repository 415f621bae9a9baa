import gzip

import pytest

from attnkit.data.sst2 import read_tsv


def test_reads_header_gz_and_rows(tmp_path):
    p = tmp_path / "train.tsv.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write("sentence\tlabel\nhide new secretions \t0\na gorgeous film \t1\n\n")
    rows = read_tsv(p)
    assert [(r.text, r.label, r.line) for r in rows] == [("hide new secretions", "0", 2), ("a gorgeous film", "1", 3)]


def test_bad_rows_name_file_and_line(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("sentence\tlabel\ngood \t1\nno label here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv:3: expected 2 tab-separated fields"):
        read_tsv(p)
    p.write_text("good \t1\n \t0\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv:2: empty text"):
        read_tsv(p)
    p.write_text("sentence\tlabel\n", encoding="utf-8")
    with pytest.raises(ValueError, match="empty dataset"):
        read_tsv(p)
