"""``--figures html|png|both``: one definition (``cli.options.add_figures_option``) on every command that writes both
HTML pages and PNG files, and each writes what it says (``attend``'s own test: test_attend_figures.py; transcribe's:
test_transcribe_shown.py; predict's: test_evaluate_predict.py)."""

from __future__ import annotations

import pytest

from attnkit.cli.main import main
from attnkit.cli.options import FIGURES

from .test_help import ALL

# The commands that write both pages and PNGs (experiment, lra, complexity and train write PNGs and Markdown only).
BOTH = {"attend", "translate", "transcribe", "predict", "lecture", "positions"}


def test_every_figures_option_is_the_shared_one():
    having = set()
    for path, parser in ALL:
        for a in parser._actions:
            if "--figures" in a.option_strings:
                having.add(" ".join(path))
                assert tuple(a.choices) == FIGURES and a.default == "both", path
                assert "what to write: the HTML pages (" in a.help, path
    assert having == BOTH


@pytest.mark.parametrize("figures, files", [
    ("html", ["lecture.html"]), ("png", ["lecture_attention.png"]), ("both", ["lecture.html", "lecture_attention.png"]),
])
def test_lecture_figures(tmp_path, capsys, figures, files):
    assert main(["lecture", "--out", str(tmp_path), "--figures", figures]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    out = capsys.readouterr().out
    assert [f"wrote {tmp_path / f}" in out for f in files] == [True] * len(files)


PNGS = ["distance.png", "rotation.png", "sinusoidal.png"]


@pytest.mark.parametrize("figures, files", [
    ("html", ["positions.html"]), ("png", PNGS), ("both", sorted([*PNGS, "positions.html"])),
])
def test_positions_figures(tmp_path, capsys, figures, files):
    out = tmp_path / "out"
    assert main(["positions", "--out", str(out), "--length", "8", "--dim", "8", "--model", "",
                 "--figures", figures]) == 0
    assert sorted(p.name for p in out.iterdir()) == files  # no temporary folder left behind either
    printed = capsys.readouterr().out
    assert sorted(line.split("/")[-1] for line in printed.splitlines() if line.startswith("wrote ")) == files
    if figures != "png":  # the page holds its three pictures whether or not the PNG files are kept
        assert (out / "positions.html").read_text().count("data:image/png;base64,") == 3


def test_a_bad_choice_is_refused_while_parsing(capsys):
    with pytest.raises(SystemExit) as e:
        main(["lecture", "--figures", "pdf"])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("attnkit lecture: error: argument --figures: invalid choice: 'pdf'")
