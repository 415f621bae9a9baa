"""attnkit.outputs: OS errors that name their file, folders swapped in whole, and what write_folder may replace."""

import errno
import json
import os

import pytest
import safetensors

from attnkit.outputs import MARKER, check_replaceable, error_line, swap_in, write_folder, writing


def test_writing_names_the_file_and_turns_safetensors_io_errors_into_os_errors(tmp_path):
    with pytest.raises(OSError) as e, writing(tmp_path / "a.json"):
        raise OSError(errno.ENOSPC, "No space left on device")  # what a failing write() raises: no file
    assert e.value.filename == str(tmp_path / "a.json")
    assert error_line(e.value) == f"no space left on device writing {tmp_path / 'a.json'}"
    with pytest.raises(OSError) as e, writing(tmp_path / "b"):
        raise OSError(errno.EACCES, "Permission denied", "/elsewhere")  # a file already named stays
    assert error_line(e.value) == "/elsewhere: Permission denied"
    with pytest.raises(OSError) as e, writing(tmp_path / "w.safetensors"):
        raise safetensors.SafetensorError("Error while serializing: I/O error: Read-only file system (os error 30)")
    assert e.value.errno == errno.EROFS and e.value.filename == str(tmp_path / "w.safetensors")
    with pytest.raises(safetensors.SafetensorError), writing(tmp_path / "x"):  # not an I/O error: unchanged
        raise safetensors.SafetensorError("Error while deserializing header: HeaderTooLarge")
    assert error_line(FileNotFoundError("embed: --file not found: x")) == "embed: --file not found: x"
    assert error_line(OSError(errno.EXDEV, "Invalid cross-device link", "a", None, "b")) == \
        "a -> b: Invalid cross-device link"


def test_swap_in_replaces_a_folder_only_once_the_new_one_is_in_place(tmp_path, monkeypatch):
    final, new = tmp_path / "final", tmp_path / ".tmp-final-1"
    final.mkdir()
    (final / "old.txt").write_text("old")
    new.mkdir()
    (new / "new.txt").write_text("new")
    real = os.rename

    def rename(a, b):
        if str(a) == str(new):
            raise OSError(errno.EIO, "Input/output error", str(a))
        return real(a, b)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError):
        swap_in(new, final)
    assert os.listdir(final) == ["old.txt"]  # put back
    monkeypatch.undo()
    swap_in(new, final)
    assert os.listdir(final) == ["new.txt"] and sorted(os.listdir(tmp_path)) == ["final"]


def test_write_folder_leaves_the_target_as_it_was_on_any_error(tmp_path):
    out = tmp_path / "out"

    def write(tmp):
        (tmp / "a.txt").write_text("a")

    write_folder(out, write)
    assert json.loads((out / MARKER).read_text())["files"] == ["a.txt"]

    def broken(tmp):
        (tmp / "a.txt").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_folder(out, broken, overwrite=True)
    assert (out / "a.txt").read_text() == "a" and sorted(os.listdir(tmp_path)) == ["out"]


def test_check_replaceable_refuses_links_bad_markers_and_special_paths(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ValueError, match="is a symbolic link"):
        check_replaceable(tmp_path / "link")
    d = tmp_path / "d"
    d.mkdir()
    (d / "x").write_text("x")
    for marker in ("{", "[]", json.dumps({"written_by": "someone else", "files": ["x"]}),
                   json.dumps({"written_by": "attnkit export", "files": "x"})):
        (d / MARKER).write_text(marker)
        with pytest.raises(ValueError, match="did not write"):
            check_replaceable(d, overwrite=True)
    (d / MARKER).write_text(json.dumps({"written_by": "attnkit export", "files": ["x"]}))
    check_replaceable(d, overwrite=True)
    with pytest.raises(ValueError, match="it holds the run"):
        check_replaceable(tmp_path, overwrite=True, keep=[("the run", d)])
