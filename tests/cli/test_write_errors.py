"""Output paths that cannot be written (`attend --out FILE`, `lra generate --out FILE`, a read-only or full file
system, a file where a folder should be) are one line naming the path, never a traceback."""

import errno
import os

import pytest

from attnkit.cli.main import main


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnkit: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv", [["attend", "I saw a saw"], ["lra", "generate", "listops", "--seed", "0"],
                                  ["lra", "generate", "pathfinder", "--seed", "0"]])
def test_out_that_is_a_file_or_runs_through_one(argv, tmp_path, capsys):
    """Checked before any model is loaded or any data generated (these return at once)."""
    f = tmp_path / "taken.txt"
    f.write_text("mine")
    for out, says in [(f, f"--out {f} is a file, not a folder"), (f / "sub", f"cannot be made: {f} is a file"),
                      ("/dev/null", "is a special file (a device, pipe or socket), not a folder")]:
        assert main([*argv, "--out", str(out)]) == 1
        assert says in one_line_error(capsys)
    assert f.read_text() == "mine"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EISDIR, errno.ENOTDIR])
def test_os_errors_are_one_line_naming_the_file(code, tmp_path, monkeypatch, capsys):
    import attnkit.cli.lra as lra

    path = str(tmp_path / "out" / "basic_train.tsv")

    def fail(args):
        raise OSError(code, os.strerror(code), path)

    monkeypatch.setattr(lra, "run_generate_listops", fail)
    assert main(["lra", "generate", "listops", "--out", str(tmp_path / "out"), "--seed", "0"]) == 1
    err = one_line_error(capsys)
    want = f"no space left on device writing {path}" if code == errno.ENOSPC else f"{path}: {os.strerror(code)}"
    assert err == f"attnkit: error: {want}"


def test_a_real_os_error_from_a_command_without_its_own_check(tmp_path, capsys):
    out = tmp_path / "lra"
    (out / "basic_train.tsv").mkdir(parents=True)  # the generator's first file is a folder: its temporary file
    argv = ["lra", "generate", "listops", "--out", str(out), "--seed", "0", "--n-train", "2", "--n-val", "1",
            "--n-test", "1", "--max-length", "40"]  # cannot replace it
    assert main(argv) == 1
    err = one_line_error(capsys)
    assert err.startswith(f"attnkit: error: {out}{os.sep}.basic_train.tsv.") and err.endswith(
        f".part -> {out / 'basic_train.tsv'}: Is a directory"), err
    assert sorted(p.name for p in out.iterdir()) == ["basic_train.tsv"]  # no temporary file left behind


@pytest.mark.parametrize("argv", [["experiment", "rnn", "--quick"], ["experiment", "positions", "--quick"],
                                  ["lra", "generate", "listops", "--seed", "0"], ["lra", "run", "--quick"],
                                  ["lra", "cell", "--task", "mqar", "--variant", "full"],
                                  ["asr", "generate", "--n", "1"]])
def test_an_empty_out_is_refused_while_parsing(argv, tmp_path, capsys, monkeypatch):
    """Issue 65, item 4: `--out ""` wrote into the working folder (where `export` refuses)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main([*argv, "--out", ""])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "argument --out: must name a folder or file, got ''" in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_lra_cell_results_is_checked_before_training(tmp_path, capsys):
    """A folder (or a file that cannot be written) as --results was found only after the cell had trained."""
    import time

    start = time.perf_counter()
    assert main(["lra", "cell", "--task", "mqar", "--variant", "full", "--suite", "quick", "--out",
                 str(tmp_path / "cell"), "--results", str(tmp_path)]) == 1
    assert one_line_error(capsys) == f"attnkit: error: {tmp_path}: Is a directory"
    assert time.perf_counter() - start < 5 and not (tmp_path / "cell").exists()
