"""FSDD's recordings plus Debian's flite voices as extra speakers, in one folder of WAVs for ``attnkit train asr
--data``: a second synthesiser, tried on a dev speaker (docs/asr.md, "Leave one speaker out").

    python bench/asr_flite_voices.py --out /tmp/fsdd-flite          # needs: apt install flite
    attnkit train asr --out runs/dev/flite --data /tmp/fsdd-flite --holdout-speaker george --dev-speaker jackson

Each flite voice (``kal``, ``awb``, ``rms``, ``slt``; ``--voices``) becomes a speaker ``flite<voice>`` that says each
digit ``--takes`` times (50, as FSDD's speakers: indices 0-4 go to the test pool, 5-9 to dev, 10-49 to training), each
take at a duration stretch drawn from 0.8-1.25 and a mean pitch 0.85-1.2 times the voice's, resampled to 8 kHz,
trimmed to 20 ms of silence before the sound and 80 ms after, at a level drawn around -26 dB
(``attnkit.data.synthetic_voices``' finishing, the same as the eSpeak NG voices'), from ``--seed``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnkit.data.fsdd import load_fsdd  # noqa: E402
from attnkit.data.synthetic_voices import RATE, WORDS, _finish  # noqa: E402

# voice -> (Hz, about its own mean pitch; the number of its random generator, default_rng([--seed, number]): the
# numbers of the run in docs/asr.md, whose 1 went to a voice named with digits that the FSDD reader skipped)
VOICES = {"kal": (105.0, 0), "awb": (110.0, 2), "rms": (100.0, 3), "slt": (170.0, 4)}


def write_wav(path: Path, samples: np.ndarray) -> None:
    """int16 mono samples at ``RATE`` -> a WAV file."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(samples.astype("<i2").tobytes())


def say(voice: str, word: str, stretch: float, pitch: float, tmp: Path) -> tuple[np.ndarray, int]:
    """flite's int16 samples of ``word`` and their rate."""
    subprocess.run(["flite", "-voice", voice, "--setf", f"duration_stretch={stretch:.3f}", "--setf",
                    f"int_f0_target_mean={pitch:.1f}", "-t", word, "-o", str(tmp)], check=True)
    with wave.open(str(tmp)) as r:
        return np.frombuffer(r.readframes(r.getnframes()), dtype="<i2"), r.getframerate()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder to write (FSDD's WAVs and the flite voices')")
    p.add_argument("--data", type=Path, default=None, help="FSDD (default: <data dir>/fsdd/recordings.tar.gz)")
    p.add_argument("--voices", nargs="+", default=list(VOICES), choices=list(VOICES))
    p.add_argument("--takes", type=int, default=50)
    p.add_argument("--seed", type=int, default=77)
    a = p.parse_args()
    if shutil.which("flite") is None:
        sys.exit("asr_flite_voices: flite was not found (apt install flite)")
    if not 10 <= a.takes <= 1000:
        sys.exit(f"asr_flite_voices: --takes must be in [10, 1000], got {a.takes}")
    a.out.mkdir(parents=True, exist_ok=True)
    for r in load_fsdd(a.data):
        write_wav(a.out / r.name, (np.clip(r.samples, -1, 32767 / 32768) * 32768).round().astype(np.int16))
    with tempfile.TemporaryDirectory() as tmp:
        for voice in a.voices:
            hz, number = VOICES[voice]
            rng = np.random.default_rng([a.seed, number])
            level = rng.uniform(-30, -22)
            for take in range(a.takes):
                for digit, word in enumerate(WORDS):
                    stretch, pitch = rng.uniform(0.8, 1.25), hz * rng.uniform(0.85, 1.2)
                    wave_, rate = say(voice, word, stretch, pitch, Path(tmp) / "say.wav")
                    write_wav(a.out / f"{digit}_flite{voice}_{take}.wav",
                              _finish(wave_, rate, level + rng.uniform(-2, 2)))
            print(f"flite{voice}: {10 * a.takes} recordings", flush=True)
    print(f"{len(list(a.out.glob('*.wav')))} WAVs in {a.out}")


if __name__ == "__main__":
    main()
