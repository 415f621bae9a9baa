"""What every figure is drawn with: tick labels thin out to stay readable, long texts are cut, a PNG is written
whole at the figures' DPI with its full title kept in the file."""

import matplotlib

from attnkit.viz import figure

matplotlib.use("Agg")


def test_ticks_thin_out_to_stay_readable():
    fig, ax = figure.pyplot().subplots()
    figure.ticks(ax, "x", [f"t{i}" for i in range(200)], 200, 2.0)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert 10 < len(labels) < 200 and labels[0] == "t0" and labels[1] != "t1"
    assert all(t.get_fontsize() >= figure.MIN_LABEL_PT for t in ax.get_xticklabels())
    figure.pyplot().close(fig)


def test_short_text():
    assert figure.short_text("abc", 3) == "abc" and figure.short_text("abcd", 3) == "ab\u2026"


def test_save_figure_writes_a_whole_png_with_its_title(tmp_path):
    from PIL import Image

    plt = figure.pyplot()
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [1, 0])
    title = "a title " + "x" * 300
    fig.suptitle(title)
    path = figure.save_figure(fig, tmp_path / "sub" / "f.png")  # folders made
    plt.close(fig)
    assert path == tmp_path / "sub" / "f.png" and [p.name for p in path.parent.iterdir()] == ["f.png"]
    with Image.open(path) as im:
        assert im.format == "PNG" and im.info["Title"] == title  # the whole title in the file
        assert round(im.info["dpi"][0]) == figure.DPI and im.size[0] < 2 * figure.DPI * 2  # the drawn one was cut
