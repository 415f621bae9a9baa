"""What ``attnkit predict ... --attention DIR`` draws for a speech run (a fresh model is enough)."""

import wave
from dataclasses import asdict

import numpy as np
import torch

from attnkit.data.audio import FeatureConfig
from attnkit.models.speech import SpeechClassifier, SpeechConfig
from attnkit.nn import TransformerConfig
from attnkit.tasks.speech import predict


def test_speech_predict_writes_the_frames_attention(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "3.wav"
    t = np.arange(4000) / 8000
    with wave.open(str(path), "wb") as f:  # half a second of a rising tone
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(8000)
        f.writeframes((8000 * np.sin(2 * np.pi * (300 + 400 * t) * t)).astype("<i2").tobytes())
    enc = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, dropout=0.0)
    model = SpeechClassifier(SpeechConfig(n_mels=16, window=(2, 2), subsample=2, encoder=enc)).eval()
    meta = {"features": asdict(FeatureConfig(n_mels=16)), "labels": [str(i) for i in range(10)]}
    lines = predict(model, meta, [str(path)], tmp_path / "maps")
    assert lines[0].startswith(f"{path}: ") and lines[1] == f"wrote {tmp_path / 'maps' / 'attention_0.png'}"
    assert (tmp_path / "maps" / "attention_0.png").read_bytes()[:4] == b"\x89PNG"
    assert predict(model, meta, [str(path)], None) == lines[:1]  # no folder: no picture
