"""Connected spoken digits from FSDD, in the spirit of TIDIGITS: utterances of 1-7 digits by one speaker.

Utterance ``i`` of a set is made from ``numpy.random.default_rng([seed, i])`` alone, so it is the same
whatever the set's size and whichever utterances were made before it:

1. a speaker of the pool (uniformly, or by ``weights``: e.g. synthetic voices given a share of the utterances), a
   length ``min_digits .. max_digits``, the digits, and for each digit one of that speaker's recordings of it in the
   pool; with ``mix`` > 0, each digit is instead said by a speaker drawn anew (as the first) with probability
   ``mix``, so that the digits around one do not tell whose voice it is (``attnkit train asr --mix-speakers``);
2. silence before the first digit (``edge_ms``), between digits (``pause_ms``) and after the last;
3. a speed change (``speed``: the whole utterance resampled, pitch and tempo together, as Kaldi's speed
   perturbation), a gain (``gain_db``), white noise at a signal-to-noise ratio (``snr_db``) against the
   speech's mean power, and a clip to [-1, 1].

Pools (``pools``) keep the test recordings out of training: **recordings held out** (FSDD's own test
split, index 0-4 of each digit and speaker, makes the test set; index 5-9 the dev set; 10-49 training)
and **speaker held out** (every recording of one speaker is a second test set; the other five speakers'
recordings make the three pools above); a **dev speaker** can be kept out of training too, for choosing settings on
a voice that is not the test's.
``attnkit asr generate`` writes a set as WAVs plus ``transcripts.tsv`` (``write_set``).
"""

from __future__ import annotations

import os
import wave
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..nn.limits import check_fields, ints
from .audio import resample
from .fsdd import Recording

__all__ = ["DigitsConfig", "Utterance", "DigitUtterances", "pools", "write_wav", "write_set", "TSV", "POOLS"]

TSV = "transcripts.tsv"
POOLS = ("train", "dev", "test")


def _pair(name: str, value, low: float, high: float) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"DigitsConfig: `{name}` must be (low, high), got {value!r}") from None
    if not (low <= a <= b <= high):
        raise ValueError(f"DigitsConfig: `{name}` must satisfy {low} <= low <= high <= {high}, got {value!r}")
    return a, b


@dataclass(frozen=True)
class DigitsConfig:
    """How utterances are put together (ranges are drawn uniformly)."""

    min_digits: int = field(default=1, metadata={"help": "fewest digits in an utterance", "range": ints(1, 64)})
    max_digits: int = field(default=7, metadata={"help": "most digits in an utterance", "range": ints(1, 64)})
    pause_ms: tuple[float, float] = field(default=(50.0, 400.0), metadata={
        "help": "silence between two digits, milliseconds (low, high)"})
    edge_ms: tuple[float, float] = field(default=(50.0, 300.0), metadata={
        "help": "silence before the first and after the last digit, milliseconds (low, high)"})
    gain_db: tuple[float, float] = field(default=(-6.0, 6.0), metadata={"help": "gain in dB (low, high)"})
    snr_db: tuple[float, float] = field(default=(20.0, 40.0), metadata={
        "help": "white noise: signal-to-noise ratio in dB against the speech's mean power (low, high)"})
    speed: tuple[float, float] = field(default=(0.9, 1.1), metadata={
        "help": "speed factor (low, high): > 1 is faster and higher"})
    sample_rate: int = field(default=8000, metadata={"help": "sample rate in Hz (FSDD's is 8000)",
                                                     "range": ints(1000, 192000)})

    def __post_init__(self):
        check_fields(self)
        if self.min_digits > self.max_digits:
            raise ValueError(f"DigitsConfig: `min_digits` ({self.min_digits}) exceeds `max_digits` "
                             f"({self.max_digits})")
        for name, low, high in (("pause_ms", 0, 60000), ("edge_ms", 0, 60000), ("gain_db", -60, 60),
                                ("snr_db", -20, 200), ("speed", 0.25, 4)):
            object.__setattr__(self, name, _pair(name, getattr(self, name), low, high))

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> DigitsConfig:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


@dataclass(frozen=True, eq=False)
class Utterance:
    samples: np.ndarray  # (S,) float32 in [-1, 1] at the config's rate
    digits: tuple[int, ...]
    speaker: str
    sources: tuple[str, ...]  # the FSDD recording of each digit, e.g. "7_theo_12.wav"
    spans: tuple[tuple[int, int], ...]  # (start, end) sample of each digit in ``samples``

    @property
    def transcript(self) -> str:
        """The digits separated by spaces: ``"7 0 9 1"``."""
        return " ".join(map(str, self.digits))


def _by_speaker_digit(pool: Sequence[Recording]) -> dict[str, list[list[Recording]]]:
    table: dict[str, list[list[Recording]]] = {}
    for r in sorted(pool, key=lambda r: r.name):
        table.setdefault(r.speaker, [[] for _ in range(10)])[r.digit].append(r)
    for spk, rows in table.items():
        missing = [d for d in range(10) if not rows[d]]
        if missing:
            raise ValueError(f"digits: speaker {spk!r} has no recording of digit(s) {missing} in this pool")
    return table


class DigitUtterances(Sequence):
    """``n`` utterances made from the recordings ``pool`` (a Sequence: item i is made when asked for)."""

    def __init__(self, pool: Sequence[Recording], n: int, seed: int, config: DigitsConfig = DigitsConfig(),
                 weights: dict[str, float] | None = None, mix: float = 0.0):
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"digits: `n` must be an integer >= 0, got {n!r}")
        if not (isinstance(mix, (int, float)) and 0 <= mix <= 1):
            raise ValueError(f"digits: `mix` must be a number in [0, 1], got {mix!r}")
        if not pool:
            raise ValueError("digits: the pool of recordings is empty")
        self.table, self.n, self.seed, self.config = _by_speaker_digit(pool), n, int(seed), config
        self.speakers = sorted(self.table)
        self.chances = None if weights is None else _chances(weights, self.speakers)
        self.mix = float(mix)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Utterance:
        if not -self.n <= i < self.n:
            raise IndexError(f"digits: utterance {i} of {self.n}")
        return make_utterance(self.table, self.speakers, np.random.default_rng([self.seed, i % self.n]), self.config,
                              self.chances, self.mix)


def _chances(weights: dict[str, float], speakers: list[str]) -> np.ndarray:
    """Each speaker's probability (speakers' order) from ``weights``, one a speaker of the pool, >= 0, not all 0."""
    if sorted(weights) != speakers:
        raise ValueError(f"digits: `weights` must name each speaker of the pool once ({speakers}), got "
                         f"{sorted(weights)!r:.200}")
    w = np.array([float(weights[s]) for s in speakers])
    if not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
        raise ValueError(f"digits: `weights` must be finite numbers >= 0, not all 0, got {weights!r:.200}")
    return w / w.sum()


def _silence(rng: np.random.Generator, ms: tuple[float, float], rate: int) -> np.ndarray:
    return np.zeros(int(round(rng.uniform(*ms) * rate / 1000)), dtype=np.float32)


def make_utterance(table: dict[str, list[list[Recording]]], speakers: list[str], rng: np.random.Generator,
                   config: DigitsConfig, chances: np.ndarray | None = None, mix: float = 0.0) -> Utterance:
    """One utterance from ``rng`` (see the module doc); its speaker drawn with ``chances`` (speakers' order), else
    uniformly; with ``mix`` > 0 each digit's speaker drawn anew with that probability (no extra draws at 0)."""
    cfg, rate = config, config.sample_rate

    def draw(size=None):
        return rng.integers(len(speakers), size=size) if chances is None else rng.choice(len(speakers), size, p=chances)

    speaker = speakers[int(draw())]
    n = int(rng.integers(cfg.min_digits, cfg.max_digits + 1))
    digits = tuple(int(d) for d in rng.integers(0, 10, size=n))
    says = [speaker] * n
    if mix > 0:
        anew, others = rng.random(n) < mix, draw(n)
        says = [speakers[int(o)] if a else speaker for a, o in zip(anew, others, strict=True)]
    recs = [table[who][d][int(rng.integers(len(table[who][d])))] for who, d in zip(says, digits, strict=True)]
    parts, spans, at = [_silence(rng, cfg.edge_ms, rate)], [], 0
    at = len(parts[0])
    for k, r in enumerate(recs):
        x = r.samples if rate == 8000 else resample(r.samples, 8000, rate)
        x = x - float(x.mean())  # FSDD has recordings with a DC offset
        spans.append((at, at + len(x)))
        parts.append(x.astype(np.float32))
        at += len(x)
        pause = _silence(rng, cfg.pause_ms if k < n - 1 else cfg.edge_ms, rate)
        parts.append(pause)
        at += len(pause)
    x = np.concatenate(parts)
    speed = float(rng.uniform(*cfg.speed))
    if abs(speed - 1.0) > 1e-6:
        y = resample(x, rate, max(1, int(round(rate / speed))))
        scale = len(y) / len(x)
        spans = [(int(s * scale), min(len(y), int(round(e * scale)))) for s, e in spans]
        x = y
    gain = 10 ** (rng.uniform(*cfg.gain_db) / 20)
    speech = np.concatenate([x[s:e] for s, e in spans])
    power = float(np.mean(speech.astype(np.float64) ** 2)) * gain ** 2
    noise_power = power / 10 ** (rng.uniform(*cfg.snr_db) / 10)
    noise = rng.standard_normal(len(x)) * np.sqrt(noise_power)
    out = np.clip(x * gain + noise, -1.0, 1.0).astype(np.float32)
    return Utterance(out, digits, speaker, tuple(r.name for r in recs), tuple(spans))


def pools(recs: Sequence[Recording], holdout_speaker: str | None = None, dev_speaker: str | None = None
          ) -> dict[str, list[Recording]]:
    """{"train", "dev", "test"} -> recordings of the training speakers (index 10-49, 5-9, 0-4); with
    ``holdout_speaker`` "test_speaker" -> every recording of that speaker, and with ``dev_speaker`` "dev_speaker" ->
    every recording of that one (a second voice kept out of training, for choosing settings without the test
    speaker); no recording is in two pools."""
    speakers = sorted({r.speaker for r in recs})
    for name, who in (("holdout_speaker", holdout_speaker), ("dev_speaker", dev_speaker)):
        if who is not None and who not in speakers:
            raise ValueError(f"digits: unknown speaker {who!r} (`{name}`); known: {speakers}")
    if dev_speaker is not None and dev_speaker == holdout_speaker:
        raise ValueError(f"digits: `dev_speaker` must differ from `holdout_speaker`, got {dev_speaker!r} for both")
    own = [r for r in recs if r.speaker not in (holdout_speaker, dev_speaker)]
    out = {"train": [r for r in own if r.index >= 10], "dev": [r for r in own if 5 <= r.index < 10],
           "test": [r for r in own if r.index < 5]}
    if holdout_speaker is not None:
        out["test_speaker"] = [r for r in recs if r.speaker == holdout_speaker]
    if dev_speaker is not None:
        out["dev_speaker"] = [r for r in recs if r.speaker == dev_speaker]
    return out


def write_wav(path: str | os.PathLike, samples: np.ndarray, rate: int) -> Path:
    """16-bit mono PCM WAV of samples (S,) in [-1, 1]."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2")
    with wave.open(os.fspath(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return Path(path)


def write_set(utterances: DigitUtterances, out: str | os.PathLike) -> Path:
    """``out/NNNNN.wav`` for each utterance and ``out/transcripts.tsv`` (path, transcript, speaker, sources)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    width = max(5, len(str(len(utterances) - 1)))
    rows = ["path\ttranscript\tspeaker\tsources"]
    for i, u in enumerate(utterances):
        name = f"{i:0{width}d}.wav"
        write_wav(out / name, u.samples, utterances.config.sample_rate)
        rows.append(f"{name}\t{u.transcript}\t{u.speaker}\t{','.join(u.sources)}")
    tsv = out / TSV
    tmp = tsv.with_name(TSV + ".tmp")
    tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
    os.replace(tmp, tsv)
    return tsv
