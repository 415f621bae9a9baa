"""`attnkit train asr`, `evaluate`, `transcribe`, `asr generate` and `load_pretrained(...).transcribe` end to end
on a tiny run over generated recordings (tones, not speech: the run learns nothing; these check the plumbing),
and every kind of bad sound file: a transcript or one line naming the file."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

import attnkit
from attnkit.cli.main import build_parser, main
from attnkit.data import espeak
from attnkit.data.audio import log_mel
from attnkit.data.espeak import find_engine
from attnkit.tasks import asr_sets
from attnkit.tasks.asr import feature_config
from attnkit.train.metrics import floor
from tests.data.test_fsdd import write_set
from tests.markers import needs_espeak

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = ["--train-utterances", "12", "--dev-utterances", "3", "--test-utterances", "3", "--max-steps", "2",
        "--batch-size", "4", "--eval-every", "2", "--d-model", "16", "--num-heads", "2", "--d-ff", "16",
        "--num-encoder-layers", "1", "--num-decoder-layers", "1", "--n-mels", "16", "--no-progress"]
DIGITS = re.compile(r"^(\d( \d)*)?$")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_asr_run(tmp_path_factory)


def tiny_asr_run(tmp_path_factory) -> tuple:
    """(data root, run folder): a two-step speech recognition run on generated recordings of alice and bob."""
    root = tmp_path_factory.mktemp("asr")
    write_set(root / "fsdd" / "recordings", speakers=("alice", "bob"), digits=range(10), indices=range(11))
    out = root / "run"
    assert main(["train", "asr", "--data-dir", str(root), "--holdout-speaker", "bob", "--out", str(out), *TINY]) == 0
    return root, out


def edited_copy(out, tmp_path, edit):
    """A copy of the run's checkpoint whose meta.json ``edit(meta)`` changed in place (its checksums untouched)."""
    other = tmp_path / "edited"
    other.mkdir()
    for f in (out / "ckpt-00000002").iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    meta = json.loads((other / "meta.json").read_text())
    edit(meta)
    (other / "meta.json").write_text(json.dumps(meta))
    return other


def test_train_reports_both_test_sets_and_evaluate_scores_them(run, capsys):
    root, out = run
    meta = json.loads((out / "ckpt-00000002" / "meta.json").read_text())
    assert meta["task"] == "asr" and meta["holdout_speaker"] == "bob" and meta["model"]["window"] == [8, 8]
    assert meta["features"]["normalize"] is True and meta["decoding"] == {"beam": 5, "ctc_weight": 0.5}
    assert main(["evaluate", str(out), "--data-dir", str(root), "--beam", "2"]) == 0
    text = capsys.readouterr().out
    assert "recordings held out: 3 utterances" in text and "speaker held out (bob): 3 utterances" in text
    for mode in ("CTC one pass", "greedy", "beam 2 ", "beam 2 + CTC 0.5"):
        assert len(re.findall(re.escape(mode) + r" +digit error rate \d+\.\d\d% \(\d+ sub, \d+ del, \d+ ins\)  "
                                                r"utterance accuracy \d+\.\d\d%", text)) == 2, mode
    assert main(["evaluate", str(out), "--data-dir", str(root), "--data", "recordings", "--ctc-weight", "0.2"]) == 0
    text = capsys.readouterr().out
    assert "beam 5 + CTC 0.2" in text and "CTC 0.5" not in text
    # the closing scores, in scores.json: the same numbers evaluate prints for the best checkpoint
    scores = json.loads((out / "scores.json").read_text())
    assert scores["checkpoint"] == "ckpt-00000002" and set(scores["sets"]) == {"recordings", "speaker"}
    speaker = scores["sets"]["speaker"]
    assert speaker["title"] == "speaker held out (bob)" and set(speaker["modes"]) == {"ctc", "joint"}
    assert speaker["utterances"] == 3 and speaker["modes"]["joint"]["decoding"] == "beam 5 + CTC 0.5"
    ctc = scores["sets"]["recordings"]["modes"]["ctc"]
    assert f"CTC one pass       digit error rate {ctc['der']:.2f}% ({ctc['sub']} sub, {ctc['del']} del, " \
           f"{ctc['ins']} ins)  utterance accuracy {floor(ctc['utterance_accuracy'], 2)}%" in text
    assert isinstance(meta["level_db"], float) and -80 < meta["level_db"] < 0  # the transcriber's target level


def train_bob_held_out(root: Path, *options: str) -> Path:
    """Trains a tiny run on generated recordings of alice, bob and carol with bob held out (and ``options``) in
    ``root / "run"``; returns that folder."""
    write_set(root / "fsdd" / "recordings", speakers=("alice", "bob", "carol"), digits=range(10), indices=range(11))
    out = root / "run"
    assert main(["train", "asr", "--data-dir", str(root), "--holdout-speaker", "bob", *options, "--out", str(out),
                 *TINY]) == 0
    return out


def test_a_dev_speaker_is_kept_out_of_training_and_scored_at_the_end(tmp_path, capsys):
    root = tmp_path
    out = train_bob_held_out(root, "--dev-speaker", "carol")
    text = capsys.readouterr().out
    assert "speaker held out (bob): 3 utterances" in text and "dev speaker held out (carol): 3 utterances" in text
    meta = json.loads((out / "ckpt-00000002" / "meta.json").read_text())
    assert meta["dev_speaker"] == "carol" and meta["holdout_speaker"] == "bob"
    assert set(json.loads((out / "scores.json").read_text())["sets"]) == {"recordings", "speaker", "dev_speaker"}
    assert main(["evaluate", str(out), "--data-dir", str(root), "--data", "dev-speaker", "--beam", "1"]) == 0
    text = capsys.readouterr().out
    assert "\ndev speaker held out (carol): 3 utterances" in text and "speaker held out (bob)" not in text
    assert main(["train", "asr", "--data-dir", str(root), "--holdout-speaker", "bob", "--dev-speaker", "bob",
                 "--out", str(root / "same"), *TINY]) == 1
    err = capsys.readouterr().err
    assert "--dev-speaker must differ from --holdout-speaker" in err and len(err.splitlines()) == 1
    assert main(["train", "asr", "--data-dir", str(root), "--dev-speaker", "dave", "--out", str(root / "dave"),
                 *TINY]) == 1
    assert "unknown speaker 'dave'" in capsys.readouterr().err
    assert main(["train", "asr", "--data-dir", str(root), "--speaker-adversarial", "1", "--mix-speakers", "0.5",
                 "--out", str(root / "mixed"), *TINY]) == 1
    err = capsys.readouterr().err
    assert "--speaker-adversarial needs one speaker per utterance; drop --mix-speakers" in err
    assert len(err.splitlines()) == 1


def test_a_speaker_adversarial_run_trains_loads_and_scores(tmp_path, capsys):
    root = tmp_path
    out = train_bob_held_out(root, "--speaker-adversarial", "0.5")
    meta = json.loads((out / "ckpt-00000002" / "meta.json").read_text())
    assert meta["adversary"] == {"scale": 0.5, "speakers": ["alice", "carol"]}
    assert meta["model"]["adversary_speakers"] == 2
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data-dir", str(root), "--data", "speaker", "--beam", "1"]) == 0
    assert "speaker held out (bob): 3 utterances" in capsys.readouterr().out
    model = attnkit.load_pretrained(out).model
    assert model.adversary[-1].out_features == 2


@needs_espeak
def test_synthetic_voices_join_training_and_unheard_ones_are_scored(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATTNKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(asr_sets, "EVAL_VOICES", 2)  # 10 by default: 2 test the same and are made in a second
    root = tmp_path / "data"
    write_set(root / "fsdd" / "recordings", speakers=("alice", "bob"), digits=range(10), indices=range(11))
    out = tmp_path / "run"
    assert main(["train", "asr", "--data-dir", str(root), "--out", str(out), "--tts-voices", "2", "--tts-share", "0.6",
                 *TINY]) == 0
    text = capsys.readouterr().out
    assert "synthetic voices never heard (2 voices): 3 utterances" in text
    meta = json.loads((out / "ckpt-00000002" / "meta.json").read_text())
    assert meta["tts"] == {"voices": 2, "share": 0.6, "takes": 10, "engine": str(find_engine())}
    assert set(json.loads((out / "scores.json").read_text())["sets"]) == {"recordings", "tts"}
    assert len(list((tmp_path / "cache" / "tts").glob("*.npz"))) == 4  # 2 training voices, 2 unheard
    assert main(["evaluate", str(out), "--data", "tts", "--beam", "1"]) == 0  # no FSDD needed
    text = capsys.readouterr().out
    assert "\nsynthetic voices never heard (2 voices): 3 utterances" in text and "recordings held out" not in text


def test_without_espeak_the_voices_are_refused_in_one_line(run, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(espeak, "_locate", lambda: (None, None, "system"))
    root = run[0]
    assert main(["train", "asr", "--data-dir", str(root), "--out", str(tmp_path / "r"), "--tts-voices", "3",
                 *TINY]) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnkit: error: train asr: --tts-voices 3: synthetic voices need eSpeak NG")
    assert "pip install 'attnkit[tts]'" in err and len(err.splitlines()) == 1
    assert main(["evaluate", str(run[1]), "--data", "tts"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnkit: error: evaluate: --data tts: synthetic voices need") and len(err.splitlines()) == 1


def test_generate_then_transcribe_and_evaluate_the_tsv(run, tmp_path, capsys):
    root, out = run
    gen = tmp_path / "gen"
    assert main(["asr", "generate", "--out", str(gen), "--n", "3", "--seed", "5", "--data-dir", str(root)]) == 0
    assert "wrote 3 utterances" in capsys.readouterr().out
    rows = (gen / "transcripts.tsv").read_text().splitlines()
    assert rows[0] == "path\ttranscript\tspeaker\tsources" and len(rows) == 4
    assert main(["asr", "generate", "--out", str(gen), "--n", "3", "--data-dir", str(root)]) == 1
    assert "exists; pass --overwrite" in capsys.readouterr().err
    wavs = [str(gen / f"0000{i}.wav") for i in range(3)]
    assert main(["transcribe", str(out), wavs[0]]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert DIGITS.match(line), line
    assert main(["transcribe", str(out), *wavs, "--ctc"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split("\t")[0] for ln in lines] == wavs and all(DIGITS.match(ln.split("\t")[1]) for ln in lines)
    assert main(["evaluate", str(out), "--data", str(gen / "transcripts.tsv")]) == 0
    assert f"{gen / 'transcripts.tsv'}: 3 utterances" in capsys.readouterr().out
    tr = attnkit.load_pretrained(out)
    assert tr.transcribe([wavs[1]], ctc=True) == [lines[1].split("\t")[1]]
    x, rate = soundfile.read(wavs[1], dtype="float32")
    assert tr.transcribe_array(x, rate, ctc=True) == lines[1].split("\t")[1]
    assert main(["transcribe", str(out), wavs[2], "--ctc", "--as-is"]) == 0  # silences and level as they are
    (line,) = capsys.readouterr().out.splitlines()
    x, _ = soundfile.read(wavs[2], dtype="float32")
    assert line == tr.transcribe([wavs[2]], ctc=True, as_is=True)[0] == tr.transcribe_array(x, 8000, ctc=True,
                                                                                           as_is=True)
    cleaned = [log_mel(p, tr.features) for p in tr.prepare(tr.clean(x), as_is=True)]  # what the default decodes
    assert tr.transcribe_array(x, 8000, ctc=True) == " ".join(str(d) for p in tr.decode(cleaned, ctc=True) for d in p)


def test_attention_pictures_and_lecture_page(run, tmp_path, capsys):
    root, out = run
    wav = tmp_path / "a.wav"
    soundfile.write(wav, 0.3 * np.sin(np.arange(12000) / 3.0), 8000)
    assert main(["transcribe", str(out), str(wav), "--beam", "1", "--ctc-weight", "0", "--attention",
                 str(tmp_path / "att")]) == 0
    err = capsys.readouterr().err
    assert "cross_attention_0.png" in err and "cross_attention_0_lecture.html" in err
    assert (tmp_path / "att" / "cross_attention_0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from attnkit.viz import read_lecture_html

    page = read_lecture_html(tmp_path / "att" / "cross_attention_0_lecture.html")
    assert page["keys"][:2] == ["0.00s", "0.08s"] and len(page["keys"]) == 19  # 1.5 s: 151 frames, 19 steps of 80 ms
    assert page["queries"][-1] in ("END", *"0123456789")


def bad_files(folder):
    folder.mkdir()
    t = np.arange(8000 * 2) / 8000
    files = {"empty.wav": b"", "text.wav": b"this is not a sound file\n"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    soundfile.write(folder / "silent.wav", np.zeros(16000), 8000, subtype="PCM_16")
    soundfile.write(folder / "clipped.wav", np.clip(5 * np.sin(2 * np.pi * 300 * t), -1, 1), 8000, subtype="PCM_16")
    soundfile.write(folder / "stereo.wav", np.stack([np.sin(2 * np.pi * 300 * t)] * 2, 1) * 0.3, 8000)
    t48 = np.arange(48000 * 2) / 48000
    soundfile.write(folder / "48k.wav", 0.3 * np.sin(2 * np.pi * 300 * t48), 48000, subtype="FLOAT")
    soundfile.write(folder / "long.wav", 0.01 * np.random.default_rng(0).standard_normal(8000 * 180), 8000)
    (folder / "header.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")  # a WAV cut inside its header
    return folder


def test_bad_sound_files_give_a_transcript_or_one_line(run, tmp_path, capsys):
    _, out = run
    folder = bad_files(tmp_path / "bad")
    for name in ("silent.wav", "clipped.wav", "stereo.wav", "48k.wav", "long.wav"):
        start = time.perf_counter()
        assert main(["transcribe", str(out), str(folder / name), "--beam", "1", "--ctc-weight", "0"]) == 0, name
        captured = capsys.readouterr()
        assert DIGITS.match(captured.out.rstrip("\n")) and captured.err == "", (name, captured)
        assert time.perf_counter() - start < 60, name
    for name in ("empty.wav", "text.wav", "header.wav", "missing.wav"):
        assert main(["transcribe", str(out), str(folder / name)]) == 1, name
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and str(folder / name) in err and "Traceback" not in err, err
    # several files: the readable ones are transcribed, each bad one is a line on stderr, exit status 1
    assert main(["transcribe", str(out), str(folder / "text.wav"), str(folder / "stereo.wav"), "--ctc"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{folder / 'stereo.wav'}\t") and "text.wav" in captured.err


def test_other_runs_and_options_are_refused_in_one_line(run, tmp_path, capsys):
    _, out = run
    other = edited_copy(out, tmp_path, lambda meta: meta.update(task="translate"))
    assert main(["transcribe", str(other), "x.wav"]) == 1
    err = capsys.readouterr().err
    assert "is a 'translate' run, not a speech recognition run" in err and len(err.splitlines()) == 1
    assert main(["transcribe", str(out), "x.wav", "--ctc", "--beam", "3"]) == 1
    assert "--ctc (CTC one pass) takes no --beam" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["transcribe", str(out), "x.wav", "--ctc-weight", "2"])
    assert "--ctc-weight" in capsys.readouterr().err
    assert main(["evaluate", str(out), "--data", "speakerz"]) == 1
    assert "speakerz" in capsys.readouterr().err


def test_features_normalised_per_utterance_by_default_and_by_training_statistics_when_streaming():
    parser = build_parser()
    for extra, per_utterance in (([], True), (["--normalize", "training"], False), (["--streaming"], False),
                                 (["--streaming", "--normalize", "utterance"], False)):
        args = parser.parse_args(["train", "asr", "--out", "x", "--n-mels", "24", *extra])
        cfg = feature_config(args)
        assert cfg.normalize is per_utterance and cfg.n_mels == 24, extra
        assert cfg.cepstra == 0, extra
    assert feature_config(parser.parse_args(["train", "asr", "--out", "x", "--cepstra", "13"])).cepstra == 13


@pytest.mark.parametrize("key, value, words", [
    ("hop_ms", 1e-9, "`features.hop_ms` must be a number in [5, 50], got 1e-09"),
    ("win_ms", 1e9, "`features.win_ms` must be a number in [5, 50], got 1000000000.0"),
    ("n_fft", 10**9, "`features.n_fft` must be an integer in [0, 4096], got 1000000000"),
    ("n_fft", 1e9, "`features.n_fft` must be an integer in [0, 4096], got 1000000000.0"),
    ("sample_rate", 1e9, "`features.sample_rate` must be an integer in [1000, 16000], got 1000000000.0"),
    ("sample_rate", 10**9, "`features.sample_rate` must be an integer in [1000, 16000], got 1000000000"),
    ("sample_rate", 1, "`features.sample_rate` must be an integer in [1000, 16000], got 1"),
    ("normalize", "yes", "`features.normalize` must be true or false, got 'yes'"),
    ("n_mels", 17, "`features.n_mels` is 17, but the model takes 16 mel bins"),
    ("hop_ms", 30.0, "`features.hop_ms` (30.0) must be at most `win_ms` (25.0)"),
    ("n_fft", 64, "`features.n_fft` (64) must be >= the window length (200 samples)"),
    ("cepstra", 17, "`features.cepstra` (17) must be at most `n_mels` (16)"),
    ("colour", "blue", "`features.colour` is not a setting of FeatureConfig"),
])
def test_a_speech_runs_features_are_bounded_in_one_line_naming_file_and_key(run, tmp_path, capsys, key, value, words):
    """Issue 65, item 1: each value of meta.json's `features` block is checked before any sound is read."""
    other = edited_copy(run[1], tmp_path, lambda meta: meta["features"].update({key: value}))
    wav = tmp_path / "a.wav"
    soundfile.write(wav, 0.3 * np.sin(np.arange(12000) / 3.0), 8000)
    start = time.perf_counter()
    assert main(["transcribe", str(other), str(wav)]) == 1
    err = capsys.readouterr().err
    assert err == f"attnkit: error: checkpoint: {other / 'meta.json'}: {words}" + err[err.index(words) + len(words):]
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert time.perf_counter() - start < 30


@pytest.mark.parametrize("key, value, words", [
    ("decoding", {"beam": 10**9}, "`decoding.beam` must be an integer in [1, 256], got 1000000000"),
    ("decoding", {"ctc_weight": float("nan")}, "`decoding.ctc_weight` must be a number in [0, 1], got nan"),
    ("decoding", [], "`decoding` must be a JSON object, got list"),
    ("max_seconds", 1e-9, "`max_seconds` must be a number in [0.1, 3600], got 1e-09"),
    ("utterances", {"test": 10**12}, "`utterances.test` must be an integer in [1, 10000000], got 1000000000000"),
    ("holdout_speaker", 3, "`holdout_speaker` must be a name or null, got 3"),
    ("dev_speaker", [], "`dev_speaker` must be a name or null, got []"),
    ("level_db", 1e9, "`level_db` must be a number in [-200, 20] or null, got 1000000000.0"),
    ("tts", [], "`tts` must be a JSON object, got list"),
    ("tts", {"voices": 0, "share": 0.5, "takes": 10}, "`tts.voices` must be an integer in [1, 1000], got 0"),
    ("tts", {"voices": 2, "share": 2.0, "takes": 10}, "`tts.share` must be a number in (0, 1], got 2.0"),
    ("tts", {"voices": 2, "share": 0.5}, "`tts.takes` must be an integer in [1, 1000], got None"),
    ("adversary", 1, "`adversary` must be a JSON object, got int"),
    ("adversary", {"scale": -1, "speakers": ["a"]}, "`adversary.scale` must be a number in [0, 100], got -1"),
    ("adversary", {"scale": 1, "speakers": []}, "`adversary.speakers` must be a list of names, got []"),
])
def test_a_speech_runs_other_settings_are_bounded_too(run, tmp_path, capsys, key, value, words):
    other = edited_copy(run[1], tmp_path, lambda meta: meta.update({key: value}))
    assert main(["transcribe", str(other), "x.wav"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"attnkit: error: checkpoint: {other / 'meta.json'}: {words}") and len(err.splitlines()) == 1


def test_edited_features_in_range_still_transcribe(run, tmp_path, capsys):
    """The widest settings the ranges allow decode a short file in bounded time (the STFT is computed in slices)."""
    _, out = run
    other = tmp_path / "edited"
    other.mkdir()
    for f in (out / "ckpt-00000002").iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    meta = json.loads((other / "meta.json").read_text())
    meta["features"].update(sample_rate=16000, win_ms=50, hop_ms=5, n_fft=4096, normalize=False)
    (other / "meta.json").write_text(json.dumps(meta))
    wav = tmp_path / "a.wav"
    soundfile.write(wav, 0.3 * np.sin(np.arange(12000) / 3.0), 8000)
    start = time.perf_counter()
    assert main(["transcribe", str(other), str(wav), "--ctc"]) == 0
    assert DIGITS.match(capsys.readouterr().out.rstrip("\n"))
    assert time.perf_counter() - start < 30


def test_attention_path_is_checked_before_the_transcripts(run, tmp_path, capsys):
    """Issue 65, item 4: `--attention FILE` printed the transcript, then failed with "File exists"."""
    _, out = run
    wav = tmp_path / "a.wav"
    soundfile.write(wav, 0.3 * np.sin(np.arange(12000) / 3.0), 8000)
    taken = tmp_path / "taken"
    taken.write_text("mine")
    assert main(["transcribe", str(out), str(wav), "--attention", str(taken)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (f"attnkit: error: transcribe: --attention {taken} is a file, not a "
                                                   "folder\n")
    assert taken.read_text() == "mine"


def test_attention_of_a_long_recording_shows_its_first_piece(run, tmp_path, capsys):
    """Issue 65, item 4: `--attention` on an hour of audio took 2.0 GB (every frame in the figures and pages)."""
    _, out = run
    tr = attnkit.load_pretrained(out)
    x = (0.01 * np.random.default_rng(0).standard_normal(8000 * 120)).astype(np.float32)  # two minutes
    al = tr.attend(x)
    assert al.frames.shape[0] <= tr.max_seconds * 100 + 1 < 8000 * 120 // 80
    wav = tmp_path / "long.wav"
    soundfile.write(wav, x, 8000)
    start = time.perf_counter()
    assert main(["transcribe", str(out), str(wav), "--ctc", "--attention", str(tmp_path / "att")]) == 0
    from attnkit.viz import read_lecture_html

    page = read_lecture_html(tmp_path / "att" / "cross_attention_0_lecture.html")
    assert len(page["keys"]) == -(-al.frames.shape[0] // al.step_frames)  # encoder steps of the first piece only
    assert time.perf_counter() - start < 60
    capsys.readouterr()
