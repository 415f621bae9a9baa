"""PNG heatmaps: bounded sizes whatever the length, labels thinned past what can be read, colour bars."""

import matplotlib
import pytest
import torch

from attnkit.viz import attention_grid, attention_heatmap, figure
from attnkit.viz import heatmap as hm
from attnkit.viz.image_attention import class_token_maps

matplotlib.use("Agg")


def png_size(path):
    from PIL import Image

    with Image.open(path) as im:
        return im.size


def test_grid_of_fifty_tokens_stays_bounded(tmp_path):
    w = torch.rand(6, 12, 50, 50).softmax(-1)
    tokens = [f"tok{i}" for i in range(50)]
    wide, high = png_size(attention_grid(w, tmp_path / "g.png", tokens=tokens, title="six layers"))
    assert wide <= 2100 and high <= 1800, (wide, high)  # was 12418 x 7012 before the bound
    wide, high = png_size(attention_grid(w[:1], tmp_path / "l.png", tokens=tokens, title="layer 1"))
    assert wide <= 2100 and high <= 1800, (wide, high)
    wide, high = png_size(attention_heatmap(w[0, 0], tmp_path / "h.png", queries=tokens, keys=tokens))
    assert wide <= 2100 and high <= 2100



def test_a_long_title_or_label_is_cut_and_the_png_stays_bounded(tmp_path):
    """Issue 65: a 19,200-character title made a 240-megapixel PNG (the tight box follows the longest text)."""
    w = torch.rand(1, 2, 3, 3).softmax(-1)
    long = "x" * 19200
    wide, high = png_size(attention_grid(w, tmp_path / "g.png", tokens=["a", long, "b"], title=long))
    assert wide <= 2100 and high <= 1800, (wide, high)
    wide, high = png_size(attention_heatmap(w[0, 0], tmp_path / "h.png", queries=["a", "b", long], title=long))
    assert wide <= 2100 and high <= 2100, (wide, high)


def test_labels_only_on_the_outer_panels_and_a_shared_colour_bar(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr("attnkit.viz.grid.save_figure", lambda fig, path: figures.append(fig) or path)
    monkeypatch.setattr(figure.pyplot(), "close", lambda fig: None)
    attention_grid(torch.rand(2, 3, 4, 4).softmax(-1), tmp_path / "g.png", tokens=list("abcd"), title="t")
    fig = figures[0]
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(panels) == 6 and len(bars) == 1 and "attention weight" in bars[0].get_ylabel()
    labelled_y = [ax for ax in panels if any(t.get_text() for t in ax.get_yticklabels())]
    labelled_x = [ax for ax in panels if any(t.get_text() for t in ax.get_xticklabels())]
    assert len(labelled_y) == 2 and len(labelled_x) == 3  # first column, bottom row: nothing overlaps
    assert [t.get_text() for t in labelled_x[0].get_xticklabels()] == list("abcd")
    assert fig._supxlabel.get_text() == "key (one column each)" and fig._supylabel.get_text() == "query (one row each)"
    assert bars[0].get_ylim() == (0.0, 1.0)  # absolute: heads and figures compare
    assert [ax.get_title() for ax in panels[:3]] == ["head 1", "head 2", "head 3"]
    assert all(ax.get_title() == "" for ax in panels[3:])  # head titles once, under the figure's title


def test_class_token_maps_have_a_colour_bar(tmp_path, monkeypatch):
    from attnkit.models.vision import VisionConfig

    figures = []
    monkeypatch.setattr("attnkit.viz.image_attention.save_figure", lambda fig, path: figures.append(fig) or path)
    cfg = VisionConfig()  # 8 x 8, 2 x 2 patches: 16 patches + the class token
    class_token_maps(torch.rand(1, 8, 8), torch.rand(2, 4, 17, 17).softmax(-1), cfg, tmp_path / "m.png", title="x")
    fig = figures[0]
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and "class token -> patch" in bars[0].get_ylabel()
    assert "one cell per 2 x 2 patch" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="patch grid"):
        class_token_maps(torch.rand(1, 8, 8), torch.rand(2, 4, 10, 10), cfg, tmp_path / "bad.png")


def test_frame_attention_maps(tmp_path, monkeypatch):
    from attnkit.viz.frame_attention import frame_attention_maps

    figures = []
    monkeypatch.setattr("attnkit.viz.frame_attention.save_figure", lambda fig, path: figures.append(fig) or path)
    frame_attention_maps(torch.randn(40, 20), torch.rand(2, 3, 20, 20).softmax(-1), tmp_path / "s.png",
                         title="3.wav: 3", frames_per_step=2)
    fig = figures[0]
    bars = [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert bars == ["log mel energy", "attention weight (square-root colour scale)"]
    assert len(fig.axes) == 1 + 6 + 2 and "one step per 2 frame(s)" in fig.axes[0].get_xlabel()
    with pytest.raises(ValueError, match="layers, heads"):
        frame_attention_maps(torch.randn(40, 20), torch.rand(2, 20, 20), tmp_path / "bad.png")


def test_cross_attention_png_of_long_sentences_stays_bounded(tmp_path):
    """Issue 65: 255 source and target tokens made a 5160 x 3373 px PNG at 40 (0.32 inch a token)."""
    from attnkit.viz.alignment import cross_attention_png

    w = torch.rand(4, 255, 255).softmax(-1)
    words = [f"w{i}" for i in range(255)]
    wide, high = png_size(cross_attention_png(w, words, words, tmp_path / "c.png", title="x" * 5000))
    assert wide <= 2100 and high <= 1800, (wide, high)
    wide, high = png_size(cross_attention_png(w[:, :3, :4], words[:4], words[:3], tmp_path / "s.png"))
    assert 600 <= wide <= 2100 and 300 <= high <= 1800, (wide, high)  # short sentences keep roomy cells


def test_cross_attention_png_one_colour_map_a_colour_bar_and_repeats_told_apart(tmp_path, monkeypatch):
    from attnkit.viz import alignment

    figures = []
    monkeypatch.setattr(alignment, "save_figure", lambda fig, path: figures.append(fig) or path)
    monkeypatch.setattr(figure.pyplot(), "close", lambda fig: None)
    w = torch.rand(2, 3, 4).softmax(-1)
    alignment.cross_attention_png(w, ["ein", "Hund", "ein", "</s>"], ["a", "dog", "a"], tmp_path / "c.png", title="t")
    fig = figures[0]
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>" and ax.images]
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(panels) == 3 and len(bars) == 1 and bars[0].get_ylim() == (0.0, 1.0)
    assert {ax.images[0].get_cmap().name for ax in panels} == {figure.CMAP}  # the pages' blue, not viridis
    assert [t.get_text() for t in panels[1].get_xticklabels()] == ["ein@1", "Hund@2", "ein@3", "</s>@4"]
    assert [t.get_text() for t in panels[1].get_yticklabels()] == ["a@1", "dog@2", "a@3"]
    assert "key" in panels[0].get_xlabel() and "query" in panels[0].get_ylabel()


def test_heatmap_in_the_lectures_layout(tmp_path, monkeypatch):
    """queries_as="columns": A' as the lecture writes it, a column per query; the axes say so."""
    figures = []
    monkeypatch.setattr(hm, "save_figure", lambda fig, path: figures.append(fig) or path)
    monkeypatch.setattr(figure.pyplot(), "close", lambda fig: None)
    w = torch.rand(3, 5).softmax(-1)  # 3 queries, 5 keys
    hm.attention_heatmap(w, tmp_path / "h.png", queries=list("abc"), keys=list("vwxyz"), queries_as="columns")
    ax = figures[0].axes[0]
    assert ax.images[0].get_array().shape == (5, 3) and ax.get_xlabel() == "query (one column each)"
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abc") and ax.get_ylabel() == "key (one row each)"
    with pytest.raises(ValueError, match="queries_as"):
        hm.attention_heatmap(w, tmp_path / "h.png", queries_as="diagonal")
