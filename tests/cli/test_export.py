"""`attnkit export`: it writes a new folder or replaces only its own earlier export, never the current folder, the
run, a folder holding it, the home folder or `/`; every refusal and OS error is one line and leaves all as it was."""

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest

from attnkit.cli.main import main
from attnkit.outputs import MARKER
from tests.pretrained.translation_run import make_run

pytestmark = pytest.mark.usefixtures("one_thread")


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) -> its sha256."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export") / "run"
    folder.mkdir()
    return make_run(folder)


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    """A fake current folder with files of the user's that must survive, and a fake home folder."""
    here = tmp_path / "work"
    (here / "notes").mkdir(parents=True)
    (here / "thesis.tex").write_text("three years of work")
    (here / "notes" / "todo.txt").write_text("back it up")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(here)
    return here


def export(run, out, *extra):
    return main(["export", str(run), "--format", "marian", str(out), *extra])


def one_line_error(capsys, *needles) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnkit: error: ") and "\n" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


@pytest.mark.parametrize("target", ["", ".", "./", "..", "notes/.."])
def test_the_current_folder_or_one_holding_it_is_refused_and_nothing_is_deleted(run, cwd, capsys, target):
    before, run_before = snapshot(cwd.parent), snapshot(run)
    assert export(run, target) == 1
    one_line_error(capsys, "refusing")
    assert snapshot(cwd.parent) == before and snapshot(run) == run_before
    assert sorted(os.listdir(cwd)) == ["notes", "thesis.tex"]  # no temporary folder left either


def test_the_run_its_checkpoint_and_the_folders_holding_them_are_refused(run, cwd, capsys):
    before = snapshot(run)
    ckpt = run / json.loads((run / "best.json").read_text())["path"]
    for target, says in [(run, "it is the run exported"), (run / "..", "it holds the run exported"),
                         (ckpt, "refusing to replace it"), (run.parent.parent, "refusing to replace")]:
        assert export(run, target) == 1, target
        one_line_error(capsys, says)
    assert export(ckpt, run) == 1  # a checkpoint folder given as RUN protects its run folder too
    one_line_error(capsys, "it holds the run exported")
    assert snapshot(run) == before and sorted(p.name for p in run.parent.iterdir()) == ["run"]


def test_home_and_root_are_refused(run, cwd, capsys):
    home = Path(os.environ["HOME"])
    assert export(run, home) == 1
    one_line_error(capsys, "it is the home folder")
    assert (home / ".bashrc").read_text() == "# mine" and sorted(os.listdir(home)) == [".bashrc"]
    from attnkit.outputs import check_replaceable  # the check alone: `/` is never handed to the writer in a test

    with pytest.raises(ValueError, match="it is the file system's root"):
        check_replaceable("/", overwrite=True)


def test_a_folder_export_did_not_write_is_refused_even_with_overwrite(run, cwd, capsys):
    mine = cwd / "notes"
    for extra in ([], ["--overwrite"]):
        assert export(run, mine, *extra) == 1
        one_line_error(capsys, "did not write", str(mine))
    assert (mine / "todo.txt").read_text() == "back it up"


def test_new_folder_then_own_export_replaced_only_with_overwrite(run, cwd, capsys):
    out = cwd / "exports" / "de-en"  # parents are made
    assert export(run, out) == 0
    files = sorted(os.listdir(out))
    assert files == sorted([MARKER, "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                            "tokenizer_config.json"])
    marker = json.loads((out / MARKER).read_text())
    assert marker["written_by"] == "attnkit export" and marker["files"] == sorted(set(files) - {MARKER})
    first = snapshot(out)
    capsys.readouterr()
    assert export(run, out) == 1
    one_line_error(capsys, "holds an earlier export", "--overwrite")
    (out / "config.json").write_text("{}")  # the new export must replace this
    assert export(run, out, "--overwrite") == 0
    assert snapshot(out) == first and sorted(os.listdir(out.parent)) == ["de-en"]  # no temporary folder left
    assert "exported" in capsys.readouterr().err
    (out / "my_notes.txt").write_text("mine")  # now it holds a file export did not write
    assert export(run, out, "--overwrite") == 1
    one_line_error(capsys, "'my_notes.txt', which attnkit export did not write")
    assert (out / "my_notes.txt").read_text() == "mine"
    empty = cwd / "empty"
    empty.mkdir()
    assert export(run, empty) == 0 and (empty / MARKER).is_file()  # an empty folder holds nothing to lose


def test_a_file_a_path_through_a_file_a_device_and_a_mount_point_are_one_line_errors(run, cwd, capsys):
    (cwd / "file").write_text("x")
    cases = [(cwd / "file", "exists and is not a folder"), (cwd / "file" / "sub", "file is a file"),
             ("/dev/null", "exists and is not a folder")]
    cases += [(p, "is a mount point") for p in ("/dev/shm", "/proc") if os.path.ismount(p)]
    for target, says in cases:
        assert export(run, target) == 1, target
        one_line_error(capsys, says)
    assert (cwd / "file").read_text() == "x"


def test_a_marian_folder_or_another_task_is_a_one_line_error(run, cwd, tmp_path, capsys):
    assert export(run, cwd / "m") == 0
    capsys.readouterr()
    assert export(cwd / "m", cwd / "m2") == 1
    one_line_error(capsys, "is a Hugging Face Marian folder already")
    assert export(cwd / "notes", cwd / "m3") == 1
    one_line_error(capsys, "no checkpoint in")
    assert not (cwd / "m2").exists() and not (cwd / "m3").exists()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_failing_write_keeps_the_earlier_export_and_is_one_line_naming_the_file(run, cwd, capsys, monkeypatch,
                                                                                  code):
    out = cwd / "m"
    assert export(run, out) == 0
    before = snapshot(out)
    import safetensors.torch

    def fail(tensors, path, *a, **k):
        if code == errno.ENOSPC:  # what safetensors raises on a full disk: its own error, naming no file
            raise safetensors.SafetensorError(f"Error while serializing: I/O error: No space left on device "
                                              f"(os error {code})")
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(safetensors.torch, "save_file", fail)
    capsys.readouterr()
    assert export(run, out, "--overwrite") == 1
    err = one_line_error(capsys, "model.safetensors")
    if code == errno.ENOSPC:
        assert err.startswith("attnkit: error: no space left on device writing ") and err.endswith("model.safetensors")
    else:
        assert os.strerror(code) in err
    assert snapshot(out) == before and sorted(os.listdir(cwd)) == ["m", "notes", "thesis.tex"]
