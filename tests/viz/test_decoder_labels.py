"""One label per decoder position in every tab and page (``input->output``), checked without a browser: the
decoder tab's rows and keys, the cross tab's rows and the decoder lecture page's queries are the same list."""

import attnkit
from attnkit.cli.main import main
from attnkit.viz.decoder import decoder_positions, read_decoder_html
from attnkit.viz.lecture import read_lecture_html
from tests.pretrained.translation_run import make_run
from tests.viz.test_decoder import TEXT, check_page


def test_a_decoder_position_reads_the_same_in_every_tab(tmp_path):
    run = make_run(tmp_path / "ar")
    assert main(["translate", str(run), TEXT, "--attention", str(tmp_path / "att"), "--max-new-tokens", "7"]) == 0
    tr = attnkit.load_pretrained(run)
    d = check_page(tmp_path / "att" / "attention_0.html", tr, TEXT, max_new_tokens=7)
    decoder, cross = d["tabs"][1], d["tabs"][2]
    assert decoder["queries"][0].startswith(("<s>\u2192", "<bos>\u2192")) or "\u2192" in decoder["queries"][0]
    lecture = read_lecture_html(tmp_path / "att" / "decoder_self_attention_0_lecture.html")
    assert lecture["queries"] == decoder["queries"] == cross["queries"]
    assert cross["keys"] == d["tabs"][0]["queries"]  # the source pieces
    page = read_decoder_html(tmp_path / "att" / "attention_0.html")
    assert [t["sides"] for t in page["tabs"]] == [["source (query)", "source (key)"],
                                                  ["target (query)", "target (key)"],
                                                  ["target (query)", "source (key)"]]


def test_positions_label_input_then_output():
    assert decoder_positions(["<s>", "_A", "_man"], ["_A", "_man", "</s>"]) == ["<s>\u2192_A", "_A\u2192_man",
                                                                               "_man\u2192</s>"]
    assert decoder_positions(["_A", "_man"], ["_A", "_man"]) == ["_A", "_man"]  # a NAT pass reads what it writes


def test_translate_attention_titles_name_the_printed_translation_and_its_decoding(tmp_path, capsys):
    from tests.cli.test_transcribe_shown import png_text

    run = make_run(tmp_path / "ar")
    for beam, how in ((1, "greedy"), (2, "beam 2")):
        att = tmp_path / f"att{beam}"
        assert main(["translate", str(run), TEXT, "--attention", str(att), "--max-new-tokens", "7", "--beam",
                     str(beam)]) == 0
        printed = capsys.readouterr().out.rstrip("\n")
        assert png_text(att / "cross_attention_0_layer1.png")["Title"] == f"layer 1: {printed} ({how})"
        from attnkit.viz import read_attention_html

        assert read_attention_html(att / "cross_attention_0.html")["title"] == \
            f"cross-attention: {TEXT} -> {printed} ({how})"


def test_translate_figures_choose_pages_or_pngs(tmp_path, capsys):
    run = make_run(tmp_path / "ar")
    names = {}
    for figures in ("html", "png"):
        att = tmp_path / figures
        assert main(["translate", str(run), TEXT, "--attention", str(att), "--max-new-tokens", "5", "--figures",
                     figures]) == 0
        names[figures] = sorted(p.name for p in att.iterdir())
    assert names["png"] == ["cross_attention_0_layer1.png", "cross_attention_0_layer2.png"]
    assert names["html"] == ["attention_0.html", "cross_attention_0.html", "cross_attention_0_lecture.html",
                             "decoder_self_attention_0_lecture.html"]
