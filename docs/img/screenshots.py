"""Regenerate the README's pictures of the views: python docs/img/screenshots.py [RUN] [--decoder AR --nat NAT
--text TEXT] [--only decoder] (needs Chromium).

RUN: a translation run (``attnkit train translate``); its cross-attention on one test sentence makes
``cross_attention.png`` (without RUN that picture is left as it is). ``--decoder AR``: a translation run whose
decoder page (``translate --attention``: the decoder self-attention tab) and step view (``translate --steps``, a
candidate clicked) of ``--text`` make ``decoder_tabs.png`` and ``decoding_steps.png``; ``--nat NAT``: a NAT run's
passes, ``nat_steps.png``. ``--only decoder`` makes those three only.

Writes the pages with the built-in all-MiniLM-L6-v2, the page of ``attnkit lecture`` and the figures of
``attnkit positions`` into a temporary folder, opens the pages in headless Chromium, clicks what a reader
would click, and saves small PNGs here, each cut at the end of a section (no heading cut in half).
``complexity.png`` is not made here: run ``flock /tmp/attnkit-heavy.lock attnkit complexity`` on a quiet
machine and pass its figure through ``shrink``.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

from PIL import Image

import attnkit
from attnkit.cli import lecture as lecture_command
from attnkit.pretrained import load_pretrained
from attnkit.viz import attention_html, cross_attention_html
from attnkit.viz.browser import Browser
from attnkit.viz.labels import token_labels
from attnkit.viz.lecture import model_lecture_html
from attnkit.viz.positions import position_figures
from attnkit.viz.steps_page import read_steps_html
from attnkit.viz.translation import decoder_page, steps_page

HERE = Path(__file__).resolve().parent
TEXT = "The cat sat on the mat because it was tired."
SOURCE = "Zwei junge Männer spielen Fußball auf einer Wiese."  # for a De->En translation run


def shrink(src: Path, dst: Path, width: int = 1000, crop_height: int | None = None) -> None:
    """Crop, scale to ``width`` at most and store with a 256-colour palette (small files)."""
    with Image.open(src) as im:
        im = im.convert("RGB")
        if crop_height and im.height > crop_height:
            im = im.crop((0, 0, im.width, crop_height))
        if im.width > width:
            im = im.resize((width, round(im.height * width / im.width)), Image.LANCZOS)
        im.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(dst, optimize=True)
    print(f"wrote {dst} ({dst.stat().st_size // 1024} KB)")


def decoder_pictures(b: Browser, tmp: Path, ar: str | None, nat: str | None, text: str) -> list[tuple[Path, Path]]:
    """The decoder page's masked self-attention tab and the step views: (screenshot, README picture) pairs."""
    out = []
    if ar:
        tr = attnkit.load_pretrained(ar)
        tabs, _ = decoder_page(tr, text, tmp / "tabs.html")
        p = b.open(tabs, width=1150, height=700)
        p.click("#thumbs canvas[data-layer='1'][data-head='0']")  # decoder layer 2, head 1
        p.screenshot(tmp / "tabs.png")  # the whole page: title, tabs, model view, head view and matrix
        out.append((tmp / "tabs.png", HERE / "decoder_tabs.png"))
        assert not p.errors, p.errors
        steps, _ = steps_page(tr, text, tmp / "steps.html", candidates=4)
        p = b.open(steps, width=1150, height=400)
        d = read_steps_html(steps)  # what if? the candidate whose continuation leaves the greedy walk most
        free = [s["c"] for s in d["walks"][0]["steps"]]
        t, tok = max((tuple(map(int, k.split(","))) for k in d["alternatives"]), key=lambda k: sum(
            a["c"] != b for a, b in zip(d["alternatives"][f"{k[0]},{k[1]}"]["steps"], free[k[0]:])))
        p.click(f"#steps button[data-step='{t}'][data-token='{tok}']")
        p.screenshot(tmp / "steps.png")
        out.append((tmp / "steps.png", HERE / "decoding_steps.png"))
        assert not p.errors, p.errors
    if nat:
        page, _ = steps_page(attnkit.load_pretrained(nat), text, tmp / "nat.html")
        p = b.open(page, width=1000, height=400)
        p.screenshot(tmp / "nat.png")
        out.append((tmp / "nat.png", HERE / "nat_steps.png"))
        assert not p.errors, p.errors
    return out


def arguments():
    import argparse

    p = argparse.ArgumentParser(description="Regenerate the README's pictures of the views (needs Chromium).")
    p.add_argument("run", nargs="?", help="a translation run: cross_attention.png")
    p.add_argument("--decoder", help="a translation run: decoder_tabs.png and decoding_steps.png")
    p.add_argument("--nat", help="a NAT translation run: nat_steps.png")
    p.add_argument("--text", default=SOURCE, help="the sentence --decoder and --nat translate")
    p.add_argument("--only", choices=("all", "decoder"), default="all")
    return p.parse_args()


def main() -> int:
    args = arguments()
    if args.only == "decoder":
        tmp = Path(tempfile.mkdtemp(prefix="attnkit-shots-"))
        try:
            with Browser() as b:
                pictures = decoder_pictures(b, tmp, args.decoder, args.nat, args.text)
            for src, dst in pictures:
                shrink(src, dst)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    enc = load_pretrained("all-MiniLM-L6-v2")
    res = enc.attend(TEXT)
    labels = token_labels(res.tokens)  # "it@9" beside q^9
    tmp = Path(tempfile.mkdtemp(prefix="attnkit-shots-"))
    try:
        page = attention_html(res.attentions, labels, tmp / "attention.html", title=f"{TEXT!r} (all-MiniLM-L6-v2)")
        lecture = model_lecture_html(enc.model, lambda: enc.attend(TEXT), labels, tmp / "lecture.html",
                                     title=f"{TEXT!r} (all-MiniLM-L6-v2): self-attention step by step")
        cross = None
        if args.run:  # a trained translation run's cross-attention, (layers, heads, T, S)
            al = attnkit.load_pretrained(args.run).attend(SOURCE)  # a run folder
            cross = cross_attention_html(al.weights, al.source, al.target, tmp / "cross.html",
                                         title=f"cross-attention: {SOURCE} -> {al.translation}")
        with contextlib.redirect_stdout(io.StringIO()):
            example = lecture_command.run(tmp / "example", seed=0)["page"]
        figs = position_figures(tmp / "positions", length=64, dim=128, delta=3,
                                learned=enc.model.embeddings.position_embeddings.weight.detach()[:128],
                                learned_name=enc.name)
        with Browser() as b:
            p = b.open(page, width=1200, height=1400)  # tall: the matrix shows whole, not scrolled
            p.screenshot(tmp / "model.png", selector="#model-view")
            p.click("#thumbs canvas[data-layer='1'][data-head='8']")  # layer 2, head 9: the next token
            p.hover("#lines text[data-kind='q'][data-index='8']")  # "it": its lines only
            p.screenshot(tmp / "head.png", selector="#head-view")
            p = b.open(lecture, width=1200)
            p.select("#layer", 3)
            p.click("#tokens button[data-i='7']")
            lecture_end = p.eval("document.querySelectorAll('.step')[2].getBoundingClientRect().bottom + scrollY + 8")
            p.screenshot(tmp / "lecture.png")
            p = b.open(example, width=1200)
            p.select("#layer", 1)  # example 2: two heads, scaled
            p.select("#head", 1)
            p.click("#tokens button[data-i='2']")
            p.screenshot(tmp / "matrices.png", selector="#matrices")
            assert not p.errors, p.errors
            if cross is not None:
                p = b.open(cross, width=1100)
                p.screenshot(tmp / "cross.png", selector="#head-view")
                assert not p.errors, p.errors
            pictures = decoder_pictures(b, tmp, args.decoder, args.nat, args.text)
        shrink(tmp / "model.png", HERE / "model_view.png")
        shrink(tmp / "head.png", HERE / "head_view.png")
        shrink(tmp / "lecture.png", HERE / "lecture_view.png", crop_height=round(lecture_end))
        shrink(tmp / "matrices.png", HERE / "lecture_matrices.png")
        if cross is not None:
            shrink(tmp / "cross.png", HERE / "cross_attention.png", width=900)
        shrink(figs["sinusoidal"], HERE / "positions_table.png", width=900)
        shrink(figs["rotation_png"], HERE / "positions_rotation.png", width=900)
        shrink(figs["learned"], HERE / "positions_learned.png", width=900)
        for src, dst in pictures:
            shrink(src, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
