"""Reading a sound file for transcription: any WAV (integer or float PCM, any rate, any number of channels) and
whatever else libsndfile reads (FLAC, OGG), through ``soundfile``; channels are averaged, the rate converted.

``read_audio(path, rate) -> samples (S,) float32`` raises a one-line ValueError naming the file for anything
it cannot read (not a sound file, a damaged header, no samples, longer than ``max_seconds``); a file that
holds NaN or inf samples (a damaged float WAV) is refused too. Silence and clipping are read as they are.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .audio import resample
from .jsonfile import file_problem

__all__ = ["read_audio", "MAX_SECONDS"]

MAX_SECONDS = 3600.0  # an hour: longer files are refused before they are read (a transcript would take minutes)


def read_audio(path: str | os.PathLike, rate: int, *, max_seconds: float = MAX_SECONDS) -> np.ndarray:
    """The file's samples, mixed down to one channel, at ``rate`` Hz: (S,) float32."""
    import soundfile

    p = Path(path)
    problem = file_problem(p)
    if problem is not None:
        raise ValueError(f"{p}: {problem}" if problem.startswith(("no such", "cannot")) else f"{p} is {problem}, "
                         "not a sound file")
    try:
        info = soundfile.info(os.fspath(p))
        if info.frames <= 0 or info.samplerate <= 0:
            raise ValueError(f"{p}: holds no samples")
        if info.frames / info.samplerate > max_seconds:
            raise ValueError(f"{p}: {info.frames / info.samplerate:.0f} s long, more than the {max_seconds:.0f} s "
                             "this reads")
        x, file_rate = soundfile.read(os.fspath(p), dtype="float32", always_2d=True)  # (S, channels)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as e:
        raise ValueError(f"{p}: not a sound file this can read ({str(e).splitlines()[0] if str(e) else e})") \
            from None
    if x.shape[0] == 0:
        raise ValueError(f"{p}: holds no samples")
    x = x.mean(axis=1)
    if not np.isfinite(x).all():
        raise ValueError(f"{p}: holds samples that are NaN or infinite")
    return resample(x, int(file_rate), rate) if file_rate != rate else x.astype(np.float32, copy=False)
