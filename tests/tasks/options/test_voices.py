"""``--tts-voices`` and ``--tts-share``: a frozen config checked on creation, options refused while parsing."""

from __future__ import annotations

import pytest

from attnkit.cli.main import build_parser
from attnkit.tasks.options import config_from_args
from attnkit.tasks.options.voices import VoicesConfig


def test_the_config_is_checked():
    assert VoicesConfig() == VoicesConfig(tts_voices=0, tts_share=0.5) and not VoicesConfig().any
    assert VoicesConfig(tts_voices=20).any and VoicesConfig(tts_voices=3, tts_share=1.0).to_dict() == {
        "tts_voices": 3, "tts_share": 1.0}
    for bad, words in (({"tts_voices": -1}, "`tts_voices` must be an integer in \\[0, 1000\\], got -1"),
                       ({"tts_voices": 2.5}, "`tts_voices` must be an integer"),
                       ({"tts_share": 0.0}, "`tts_share` must be a number in \\(0, 1\\], got 0.0"),
                       ({"tts_share": float("nan")}, "`tts_share` must be a number")):
        with pytest.raises(ValueError, match=words):
            VoicesConfig(**bad)


def test_train_asr_takes_the_options(capsys):
    parser = build_parser()
    args = parser.parse_args(["train", "asr", "--out", "x"])
    assert config_from_args(VoicesConfig, args) == VoicesConfig()
    args = parser.parse_args(["train", "asr", "--out", "x", "--tts-voices", "20", "--tts-share", "0.3"])
    assert config_from_args(VoicesConfig, args) == VoicesConfig(tts_voices=20, tts_share=0.3)
    for argv in (["--tts-voices", "-2"], ["--tts-voices", "1001"], ["--tts-share", "0"], ["--tts-share", "1.5"]):
        with pytest.raises(SystemExit):
            parser.parse_args(["train", "asr", "--out", "x", *argv])
        err = capsys.readouterr().err
        assert argv[0] in err and "Traceback" not in err, argv
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "asr", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "synthetic voices (eSpeak NG" in text and "(an integer in [0, 1000]; default: 0)" in text
    assert "apt install espeak-ng" in text
