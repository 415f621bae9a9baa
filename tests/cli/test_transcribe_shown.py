"""What ``transcribe --attention`` draws is the transcript it printed: the PNG's title (its Title text chunk) and
the lecture page name the printed digits and the decoding that wrote them, for each decoding; ``predict`` on a
speech recognition run points to ``transcribe``; ``transcribe`` takes ``--threads``."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
import soundfile

from attnkit.cli.main import main
from tests.cli.test_asr_cli import tiny_asr_run

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_asr_run(tmp_path_factory)[1]


def png_text(path) -> dict[str, str]:
    """The tEXt chunks of a PNG file."""
    data, out, at = path.read_bytes(), {}, 8
    while at < len(data):
        (n,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        body = data[at + 8:at + 8 + n]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        at += 12 + n
    return out


@pytest.mark.parametrize("options, decoding", [
    ([], "beam 5 + CTC 0.5"),
    (["--beam", "1", "--ctc-weight", "0"], "greedy"),
    (["--beam", "3", "--ctc-weight", "0"], "beam 3"),
    (["--ctc"], "CTC one pass; drawn: the decoder reading it"),
])
def test_the_picture_is_of_the_printed_transcript(run, tmp_path, capsys, options, decoding):
    from attnkit.viz import read_lecture_html

    wav = tmp_path / "a.wav"
    soundfile.write(wav, 0.3 * np.sin(np.arange(12000) / 3.0), 8000)
    att = tmp_path / "att"
    assert main(["transcribe", str(run), str(wav), "--threads", "1", *options, "--attention", str(att)]) == 0
    out, err = capsys.readouterr()
    printed = out.rstrip("\n")
    assert png_text(att / "cross_attention_0.png")["Title"] == f"{wav}: {printed or '(no digits)'} ({decoding})"
    page = read_lecture_html(att / "cross_attention_0_lecture.html")
    assert page["queries"] == [*printed.split(), "END"]  # the rows are the printed digits, then END
    assert page["title"].endswith(f"{wav}: {printed or '(no digits)'} ({decoding})")
    said = "transcribe: CTC one pass records no attention; the maps show the decoder reading its transcript\n"
    assert (said in err) == ("--ctc" in options)


@pytest.mark.parametrize("figures, files", [("html", ["cross_attention_0_lecture.html"]),
                                           ("png", ["cross_attention_0.png"])])
def test_figures_choose_the_page_or_the_png(run, tmp_path, capsys, figures, files):
    wav = tmp_path / "a.wav"
    soundfile.write(wav, 0.3 * np.sin(np.arange(12000) / 3.0), 8000)
    att = tmp_path / "att"
    assert main(["transcribe", str(run), str(wav), "--threads", "1", "--attention", str(att), "--figures",
                 figures]) == 0
    assert sorted(p.name for p in att.iterdir()) == files
    assert capsys.readouterr().err == "".join(f"wrote {att / f}\n" for f in files)


def test_predict_on_a_speech_recognition_run_points_to_transcribe(run, capsys):
    assert main(["predict", str(run), "test:0"]) == 1
    err = capsys.readouterr().err
    assert err == (f"attnkit: error: predict: {run} is a speech recognition run; use attnkit transcribe RUN "
                   "FILE.wav ... (`attnkit asr generate` writes WAV files)\n")
