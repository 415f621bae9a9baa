"""``attend --figures html|png|both``: the HTML pages, the PNGs or both; the layers' PNGs come from one figure
(``viz.grid.AttentionGrid``), refilled, and equal a figure drawn for each alone."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

from attnkit.cli import pretrained as cli
from attnkit.viz import attention_grid
from attnkit.viz.grid import AttentionGrid
from tests.pretrained.test_loader import make_folder


@pytest.fixture(scope="module")
def go(tmp_path_factory):
    parser = argparse.ArgumentParser(prog="attnkit")
    cli.add_parser(parser.add_subparsers())
    folder = make_folder(tmp_path_factory.mktemp("tiny") / "tiny")  # 2 layers x 2 heads: quick to draw

    def run(*argv):
        args = parser.parse_args(["attend", "I saw a saw", "--model", str(folder), *argv])
        return args.func(args)

    return run


@pytest.mark.parametrize("figures, files", [
    ("html", ["attention.html", "lecture.html"]),
    ("png", ["attention_grid.png", "layer1.png", "layer2.png"]),
    ("both", ["attention.html", "attention_grid.png", "layer1.png", "layer2.png", "lecture.html"]),
])
def test_figures_choose_what_is_written(go, tmp_path, capsys, figures, files):
    out = tmp_path / "out"
    assert go("--out", str(out), "--figures", figures) == 0
    assert sorted(p.name for p in out.iterdir()) == files
    printed = capsys.readouterr().out
    assert ("writing 3 PNG files to" in printed) == (figures != "html")
    assert ("wrote 3 PNG files to" in printed) == (figures != "html")


def pixels(path):
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def test_a_refilled_grid_draws_what_a_new_one_does(tmp_path):
    torch.manual_seed(0)
    w = torch.rand(3, 4, 6, 6).softmax(-1)
    tokens = [f"t{i}" for i in range(6)]
    with AttentionGrid((1, 4, 6, 6), tokens=tokens) as grid:
        reused = [grid.write(w[n:n + 1], tmp_path / f"r{n}.png", title=f"layer {n + 1}") for n in range(3)]
    for n, path in enumerate(reused):
        alone = attention_grid(w[n:n + 1], tmp_path / f"a{n}.png", tokens=tokens, title=f"layer {n + 1}")
        np.testing.assert_array_equal(pixels(path), pixels(alone))
    assert not np.array_equal(pixels(reused[0]), pixels(reused[1]))  # refilled, not the first drawn again
    with pytest.raises(ValueError, match=r"weights of shape \(1, 4, 5, 5\) for a grid of \(1, 4, 6, 6\)"):
        AttentionGrid((1, 4, 6, 6)).write(torch.rand(1, 4, 5, 5), tmp_path / "x.png")
