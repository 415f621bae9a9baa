"""Atomic files and the generated datasets' npz files: two writers of one path never mix their bytes, a reader
sees a whole file, a failed write leaves the old file, the arrays round-trip without pickle."""

import threading

import numpy as np
import pytest

from attnkit.data.npzfile import read_npz, write_atomic, write_npz, write_splits


def test_two_writers_each_write_a_file_of_their_own_and_the_last_to_finish_wins(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"old")
    a_started, b_done = threading.Event(), threading.Event()

    def slow(f):  # writer A: half its bytes, then waits until B has written and replaced the file
        f.write(b"A" * 1000)
        a_started.set()
        assert b_done.wait(10)
        f.write(b"A" * 1000)

    a = threading.Thread(target=write_atomic, args=(path, slow))
    a.start()
    assert a_started.wait(10)
    assert path.read_bytes() == b"old"  # A's half-written file is not the path
    write_atomic(path, lambda f: f.write(b"B" * 500))  # B, while A is half way
    assert path.read_bytes() == b"B" * 500
    b_done.set()
    a.join()
    assert path.read_bytes() == b"A" * 2000  # A, whole: B never wrote into A's file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.bin"]  # no temporary file left


def test_concurrent_npz_writers_and_readers_only_ever_see_whole_files(tmp_path):
    path = tmp_path / "d.npz"
    arrays = {k: np.full((200, 300), k, np.int16) for k in (1, 2)}  # each writer's own content
    write_npz(path, tokens=arrays[1])
    errors, stop = [], threading.Event()

    def writer(k):
        try:
            for _ in range(15):
                write_npz(path, tokens=arrays[k])
        except Exception as e:  # pragma: no cover - what the test looks for
            errors.append(e)

    def reader():
        while not stop.is_set():
            (got,) = read_npz(path, ["tokens"], what="test", missing="")
            if not any(np.array_equal(got, a) for a in arrays.values()):  # pragma: no cover
                errors.append(AssertionError("a mixed or partial file was read"))

    threads = [threading.Thread(target=writer, args=(k,)) for k in (1, 2)]
    r = threading.Thread(target=reader)
    r.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    r.join()
    assert errors == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npz"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = write_npz(tmp_path / "sub" / "d.npz", tokens=np.arange(4))  # folders made

    def broken(f):
        f.write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, broken)
    assert np.array_equal(read_npz(path, ["tokens"], what="t", missing="")[0], np.arange(4))
    assert [p.name for p in path.parent.iterdir()] == ["d.npz"]


def test_splits_round_trip_and_bad_files_are_named(tmp_path):
    splits = {"train": (np.arange(6).reshape(2, 3), np.array([0, 1])), "test": (np.zeros((1, 3)), np.array([1]))}
    paths = write_splits(splits, tmp_path, {"train": "a_train.npz", "test": "a_test.npz"}, ("x", "y"))
    assert [p.name for p in paths] == ["a_train.npz", "a_test.npz"]
    for p, (x, y) in zip(paths, splits.values()):
        gx, gy = read_npz(p, ("x", "y"), what="a", missing="")
        assert np.array_equal(gx, x) and np.array_equal(gy, y) and gx.dtype == x.dtype
    with pytest.raises(ValueError, match="a: cannot read .*a_train.npz: 'z is not a file"):
        read_npz(paths[0], ("x", "z"), what="a", missing="")
    np.savez(tmp_path / "obj.npz", x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="a: cannot read .*obj.npz: .*pickle"):  # never unpickled
        read_npz(tmp_path / "obj.npz", ("x",), what="a", missing="")
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(ValueError, match="a: cannot read .*text.npz"):
        read_npz(tmp_path / "text.npz", ("x",), what="a", missing="")
    with pytest.raises(FileNotFoundError, match=r"a: .*none.npz does not exist; make it first"):
        read_npz(tmp_path / "none.npz", ("x",), what="a", missing="make it first")


def test_text_files_keep_their_newlines(tmp_path):
    path = write_atomic(tmp_path / "t.tsv", lambda f: f.write("a\tb\nc\u00e9\r\n"), text=True)
    assert path.read_bytes() == "a\tb\nc\u00e9\r\n".encode()
