"""The wheel carries every file the native builds read: a wheel built from this checkout holds all of both
csrc/ folders (the kernels' and the inference layer's compositions', .cpp and .h), and installed from that
wheel, the loader finds the same sources (same build names)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import attnkit
from attnkit.functional import native
from attnkit.inference import native as compositions

REPO = Path(attnkit.__file__).resolve().parent.parent


def test_wheel_holds_all_of_csrc_and_installs_a_loader_that_finds_it(tmp_path):
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "attnkit", src / "attnkit", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    out = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = out.glob("attnkit-*.whl")
    for prefix, csrc in (("attnkit/functional/native/csrc/", native.CSRC),
                         ("attnkit/inference/native/csrc/", compositions.CSRC)):
        with zipfile.ZipFile(wheel) as z:
            shipped = sorted(n.removeprefix(prefix) for n in z.namelist() if n.startswith(prefix))
        assert shipped == sorted(f.name for f in csrc.iterdir() if f.is_file())
        assert any(n.endswith(".h") for n in shipped) and any(n.endswith(".cpp") for n in shipped)

    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
                                str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    code = ("import attnkit.functional.native as n, attnkit.inference.native as c; print(n.CSRC); "
            "print(n.build_name()); print(n.build_name((c.CSRC,), 'attnkit_inference'))")
    env = {**os.environ, "PYTHONPATH": str(site)}
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    where, name, other = ran.stdout.split()
    assert Path(where).is_relative_to(site)  # the installed copy, not this checkout
    assert name == native.build_name()  # same sources byte for byte, same build
    assert other == native.build_name((compositions.CSRC,), "attnkit_inference")
