"""FSDD loader and log-mel features on generated WAVs (written with the wave module)."""

from __future__ import annotations

import io
import re
import tarfile
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from attnkit.data.audio import FeatureConfig, log_mel, read_wav
from attnkit.data.download import data_root
from attnkit.data.fsdd import content_digest, load_fsdd, official_split, speaker_split

pytestmark = pytest.mark.usefixtures("one_thread")


def tone(freq: float, seconds: float = 0.3, rate: int = 8000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return 0.5 * np.sin(2 * np.pi * freq * t)


def wav_bytes(x: np.ndarray, rate: int = 8000, channels: int = 1) -> bytes:
    pcm = (np.clip(x, -1, 1) * 32767).astype("<i2")
    if channels > 1:
        pcm = np.repeat(pcm[:, None], channels, axis=1)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def write_set(folder: Path, speakers=("alice", "bob"), digits=(0, 1), indices=range(7)) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for s, spk in enumerate(speakers):
        for d in digits:
            for i in indices:
                (folder / f"{d}_{spk}_{i}.wav").write_bytes(wav_bytes(tone(300 + 400 * d + 20 * s + i)))


def test_folder_and_splits(tmp_path):
    write_set(tmp_path / "recordings")
    recs = load_fsdd(tmp_path)  # a folder holding recordings/
    assert len(recs) == 2 * 2 * 7
    r = next(r for r in recs if r.name == "1_bob_3.wav")
    assert (r.digit, r.speaker, r.index) == (1, "bob", 3)
    assert r.samples.dtype == np.float32 and r.samples.shape == (2400,)
    np.testing.assert_allclose(r.samples, tone(300 + 400 + 20 + 3), atol=1e-4)
    train, test = official_split(recs)
    assert len(test) == 2 * 2 * 5 and {r.index for r in test} == {0, 1, 2, 3, 4}
    assert {r.index for r in train} == {5, 6}
    train, test = speaker_split(recs, "alice")
    assert {r.speaker for r in test} == {"alice"} and {r.speaker for r in train} == {"bob"}
    with pytest.raises(ValueError, match="unknown speaker 'carol'"):
        speaker_split(recs, "carol")


def test_tar_archive_reads_only_recordings(tmp_path):
    src = tmp_path / "src" / "recordings"
    write_set(src, speakers=("alice",), digits=(2,), indices=range(3))
    arc = tmp_path / "recordings.tar.gz"
    with tarfile.open(arc, "w:gz") as tar:
        tar.add(src, arcname="repo-abc/recordings")
        info = tarfile.TarInfo("../../etc/2_evil_0.wav")  # outside recordings/: ignored, never extracted
        data = wav_bytes(tone(50))
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    recs = load_fsdd(arc)
    assert [r.name for r in recs] == ["2_alice_0.wav", "2_alice_1.wav", "2_alice_2.wav"]
    assert content_digest({"a": b"1"}) != content_digest({"a": b"2"})


def test_other_rate_is_resampled(tmp_path):
    (tmp_path / "3_carol_0.wav").write_bytes(wav_bytes(tone(500, 0.5, 16000), rate=16000))
    (rec,) = load_fsdd(tmp_path)
    assert rec.samples.shape == (4000,)  # 0.5 s at 8 kHz
    spec = np.abs(np.fft.rfft(rec.samples))
    assert abs(np.argmax(spec) * 8000 / 4000 - 500) <= 2  # the tone is still at 500 Hz


def test_bad_recordings_are_named(tmp_path):
    p = tmp_path / "4_dave_0.wav"
    p.write_bytes(wav_bytes(tone(400), channels=2))
    with pytest.raises(ValueError, match=r"4_dave_0\.wav has 2 channels; expected mono"):
        load_fsdd(tmp_path)
    p.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    with pytest.raises(ValueError, match=r"4_dave_0\.wav is not a PCM WAV"):
        load_fsdd(tmp_path)
    with pytest.raises(ValueError, match="not a readable tar archive"):
        load_fsdd(p)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_fsdd(tmp_path / "nope.tar.gz")
    x, rate = read_wav(wav_bytes(tone(400), rate=11025), sample_rate=None)
    assert rate == 11025 and x.shape == (2400,)  # kept at the file's rate


def test_log_mel_frames_and_peak():
    cfg = FeatureConfig(normalize=False)
    assert (cfg.win_length, cfg.hop_length, cfg.fft_size) == (200, 80, 256)  # 25 ms, 10 ms at 8 kHz
    x = tone(1000, 1.0)
    f = log_mel(x, cfg)
    assert f.shape == (8000 // 80 + 1, 40) == (cfg.num_frames(8000), 40)
    import librosa

    centres = librosa.mel_frequencies(n_mels=42, fmin=0, fmax=4000)[1:-1]  # centre of each of the 40 filters
    peak = int(f[10:-10].mean(0).argmax())
    assert abs(centres[peak] - 1000) < 100
    g = log_mel(x)  # normalised per utterance
    torch.testing.assert_close(g.mean(0), torch.zeros(40), atol=1e-4, rtol=0)
    assert log_mel(tone(1000, 0.01)).shape == (2, 40)  # shorter than a window still gives frames
    with pytest.raises(ValueError, match="hop_ms"):
        FeatureConfig(hop_ms=30)



def test_log_mel_in_slices_equals_one_stft(monkeypatch):
    """The STFT is computed a bounded number of values at a time (issue 65): the frames equal torch.stft's over the
    whole recording, with every window and hop the ranges allow."""
    import attnkit.data.audio as audio

    x = torch.from_numpy(np.random.default_rng(0).standard_normal(12345).astype(np.float32))
    for cfg in (FeatureConfig(normalize=False), FeatureConfig(n_fft=2048, hop_ms=5.3, win_ms=40, normalize=False),
                FeatureConfig(sample_rate=16000, win_ms=50, hop_ms=5, n_fft=4096, n_mels=8, normalize=False)):
        n_fft, win = cfg.fft_size, cfg.win_length
        spec = torch.stft(x, n_fft, hop_length=cfg.hop_length, win_length=win, window=torch.hann_window(win),
                          center=True, pad_mode="reflect", return_complex=True)
        want = torch.log(audio._mel_basis(cfg.sample_rate, n_fft, cfg.n_mels) @ spec.abs().square() + 1e-6).T
        torch.testing.assert_close(log_mel(x, cfg), want, atol=1e-4, rtol=1e-5)
        monkeypatch.setattr(audio, "STFT_CELLS", 3000)  # a few frames per slice
        torch.testing.assert_close(log_mel(x, cfg), want, atol=1e-4, rtol=1e-5)
        assert log_mel(x, cfg).shape == (cfg.num_frames(12345), cfg.n_mels)
        monkeypatch.undo()


@pytest.mark.parametrize("changes, words", [
    (dict(hop_ms=1e-9), "`hop_ms` must be a number in [5, 50]"), (dict(win_ms=1e9), "`win_ms` must be a number"),
    (dict(n_fft=10**9), "`n_fft` must be an integer in [0, 4096]"), (dict(sample_rate=1), "`sample_rate` must be"),
    (dict(sample_rate=8000.0), "`sample_rate` must be an integer"), (dict(normalize="yes"), "`normalize` must be true"),
    (dict(win_ms=float("nan")), "`win_ms` must be a number"), (dict(n_fft=100), "`n_fft` (100) must be >= the window"),
])
def test_feature_settings_are_bounded(changes, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        FeatureConfig(**changes)


REAL = data_root() / "fsdd" / "recordings.tar.gz"


@pytest.mark.skipif(not REAL.exists(), reason="shared FSDD archive not present")
def test_real_archive_digest_and_split():
    recs = load_fsdd()  # verifies the pinned content digest of all 3000 recordings
    train, test = official_split(recs)
    assert (len(train), len(test)) == (2700, 300)
    assert {r.speaker for r in recs} == {"george", "jackson", "lucas", "nicolas", "theo", "yweweler"}
