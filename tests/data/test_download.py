"""Where datasets are found: --data-dir, then ATTNKIT_DATA, then ../shared/data next to the checkout, then the
cache; from any working directory; and a missing dataset's error names every way to provide it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import attnkit
from attnkit.cli.main import main
from attnkit.data import download
from attnkit.data.download import cache_dir, data_root, source_checkout
from tests.data.test_planetoid import write_tiny

REPO = Path(attnkit.__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def env_without_data() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("ATTNKIT_DATA", "ATTNKIT_CACHE")}


def test_order_option_then_env_then_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTNKIT_DATA", raising=False)
    assert source_checkout() == REPO  # the tests run from a source checkout
    assert data_root() == SHARED
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path / "env"))
    assert data_root() == tmp_path / "env"
    assert data_root(tmp_path / "option") == tmp_path / "option"


def test_an_installed_copy_falls_back_to_the_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTNKIT_DATA", raising=False)
    monkeypatch.setattr(download, "source_checkout", lambda: None)
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "c"))
    assert data_root() == tmp_path / "c" and cache_dir("sst2") == tmp_path / "c" / "sst2"
    monkeypatch.delenv("ATTNKIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_root() == tmp_path / "xdg" / "attnkit"


def test_the_default_does_not_depend_on_the_working_directory(tmp_path):
    code = "from attnkit.data.download import data_root; print(data_root())"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env_without_data(), capture_output=True,
                         text=True, check=True).stdout
    assert Path(out.strip()) == SHARED


def test_a_run_from_another_directory_finds_its_data_by_option(tmp_path):
    data = tmp_path / "datasets"
    (data / "planetoid").mkdir(parents=True)
    write_tiny(data / "planetoid")
    work = tmp_path / "elsewhere"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "attnkit.cli.main", "train", "graph", "--epochs", "1", "--d-model", "8",
                        "--num-heads", "2", "--no-progress", "--threads", "1", "--out", "run",
                        "--data-dir", "../datasets"], cwd=work, env=env_without_data(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (work / "run" / "result.json").exists()


@pytest.mark.skipif(not (SHARED / "planetoid" / "ind.cora.graph").exists(),
                    reason="no shared data next to this checkout")
def test_the_checkout_data_is_found_from_another_directory(tmp_path):
    r = subprocess.run([sys.executable, "-m", "attnkit.cli.main", "train", "graph", "--dataset", "cora", "--epochs",
                        "1", "--d-model", "8", "--num-heads", "2", "--no-progress", "--threads", "1", "--out", "run"],
                       cwd=tmp_path, env=env_without_data(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run" / "result.json").exists()


@pytest.mark.parametrize("argv,names", [
    (["tagger"], ["ud_english_ewt", "--train"]),
    (["classifier"], ["sst2", "--train"]),
    (["image", "--dataset", "mnist"], ["mnist", "--train FOLDER"]),
    (["speech"], ["fsdd", "--data PATH"]),
    (["graph"], ["planetoid"]),
])
def test_missing_data_names_every_way_to_provide_it(argv, names, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "empty-cache"))
    assert main(["train", *argv, "--data-dir", str(tmp_path), "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    for way in ["--data-dir DIR", "ATTNKIT_DATA=DIR", "--download", str(tmp_path), *names]:
        assert way in err, (way, err)
