import gzip

import pytest

from attnkit.data import multi30k as m30k
from attnkit.data.download import data_root
from attnkit.data.multi30k import multi30k, multi30k_path, read_lines, read_parallel

HAVE = (data_root() / "multi30k" / "train.de.gz").exists()


def test_read_parallel_skips_empty_pairs_and_names_mismatches(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "a.en.gz"
    src.write_text("Ein Hund.\n\nZwei Katzen.\n  \n", encoding="utf-8")
    with gzip.open(tgt, "wt", encoding="utf-8") as f:
        f.write("A dog.\nA cat.\nTwo cats.\nFour.\n")
    c = read_parallel(src, tgt)
    assert c.src == ["Ein Hund.", "Zwei Katzen."] and c.tgt == ["A dog.", "Two cats."]
    assert c.lines == [1, 3] and c.empty_lines == [2, 4] and c.skipped == 2
    short = tmp_path / "b.en"
    short.write_text("A dog.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"a\.de has 4 lines but .*b\.en has 1 lines"):
        read_parallel(src, short)
    bad = tmp_path / "bad.de"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="not UTF-8"):
        read_lines(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_lines(tmp_path / "nope")
    empty = tmp_path / "e.de"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no non-empty pairs"):
        read_parallel(empty, empty)


def test_paths_names_and_download_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="`split`"):
        multi30k_path("test2017", "de", tmp_path)
    with pytest.raises(ValueError, match="`lang`"):
        multi30k_path("train", "fr", tmp_path)
    with pytest.raises(FileNotFoundError, match="--download"):
        multi30k_path("train", "de", tmp_path)
    with pytest.raises(ValueError, match="both 'de'"):
        multi30k("train", "de", "de", tmp_path)
    assert m30k.MULTI30K_URL.startswith("https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d2")
    assert set(m30k.MULTI30K_FILES) == {f"{s}.{lang}.gz" for s in m30k.SPLITS for lang in m30k.LANGS}


@pytest.mark.skipif(not HAVE, reason="Multi30k is not in the data root")
def test_shared_copy_matches_the_pinned_checksums_and_counts():
    from attnkit.data.download import sha256_file

    for name, digest in m30k.MULTI30K_FILES.items():
        assert sha256_file(data_root() / "multi30k" / name) == digest
    assert [len(multi30k(s)) for s in ("train", "val", "test")] == [29000, 1014, 1000]
    test = multi30k("test", "en", "de")
    assert test.src[0].startswith("A man") and test.tgt[0].startswith("Ein Mann")
