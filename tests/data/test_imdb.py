"""IMDb as bytes (LRA's text task) from an aclImdb folder; the download is pinned by its sha256."""

import pytest

from attnkit.data import imdb


def _fake(root, n=3):
    for split in ("train", "test"):
        for label in ("pos", "neg"):
            d = root / "aclImdb" / split / label
            d.mkdir(parents=True)
            for i in range(n):
                (d / f"{i}_7.txt").write_text(f"{label} review {i} é", encoding="utf-8")
    return root


def test_bytes_labels_and_interleaving(tmp_path):
    data = imdb.load_imdb(_fake(tmp_path), max_length=12)
    assert len(data["train"]) == 6 and [y for _, y in data["train"]] == [1, 0, 1, 0, 1, 0]
    ids, y = data["train"][0]
    assert y == 1 and ids == [b + 1 for b in "pos review 0 é".encode()[:12]]
    assert len(imdb.load_imdb(tmp_path, limit=4)["test"]) == 4
    assert imdb.byte_tokens("é", 10) == [0xC3 + 1, 0xA9 + 1]


def test_missing_folder_says_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="--download"):
        imdb.imdb_folder(tmp_path)
    assert imdb.IMDB_URL.endswith("aclImdb_v1.tar.gz") and len(imdb.IMDB_SHA256) == 64
