"""Synthetic speakers saying the ten digits, from eSpeak NG (``attnkit.data.espeak``): more voices for speech
recognition.

A voice is one of eSpeak NG's English accents (``ACCENTS``: British, American, Scottish, Received Pronunciation,
Lancaster, West Midlands, Caribbean, New York City) spoken with a voice variant (its timbre: formants, pitch range,
breathiness, or one of the Klatt synthesisers' sources; ``m3``, ``f2``, ``klatt2``, ``Annie``, ...), at a pitch, an
intonation range, a speaking rate and a level, all drawn from ``numpy.random.default_rng([seed, i])`` for voice i of a
pool. The two pools never share a variant:

- ``train``: voices ``tts00``, ``tts01``, ... (``TRAIN_VARIANTS``; ``attnkit train asr --tts-voices N`` adds the first
  N to the training recordings);
- ``eval``: voices ``unheard00``, ... (``EVAL_VARIANTS``, another seed), which a model trained on the first pool
  never heard (``attnkit evaluate RUN --data tts``).

Within a pool the first voices take distinct variants (a permutation of the pool's, drawn from the pool's seed).
Each voice says each digit word ("zero" .. "nine") ``takes`` times, each take at its own small change of rate, pitch
and range (drawn from ``default_rng([seed, i, 1])``). Each recording is resampled from the synthesiser's rate (22,050
Hz) to 8 kHz (``scipy.signal.resample_poly``), given 20 ms of silence before its sound and 80 ms after (FSDD's
recordings have a median of 20 and 80 ms; cut or added), set to the voice's level (``attnkit.data.silence.set_level``;
FSDD's median speech power is about -26 dB) and rounded to 16 bits, and comes back as an
``attnkit.data.fsdd.Recording`` (``3_tts07_4.wav``: digit 3, voice tts07, take 4), ready for ``attnkit.data.digits``.

Each voice's recordings are made once and cached: ``cache_dir("tts")/<key>.npz`` (the samples, no pickle) and
``<key>.json`` (what they were made from, the npz's sha256), written atomically, the key a sha256 of the synthesiser's
version and everything the recordings are made from; a voice takes a fraction of a second to make.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .download import cache_dir, sha256_file
from .espeak import Engine, Say, find_engine, synthesise
from .fsdd import Recording
from .npzfile import read_npz, write_atomic, write_npz
from .silence import frame_energy_db, set_level

__all__ = ["Voice", "voices", "recordings", "voice_recordings", "ACCENTS", "TRAIN_VARIANTS", "EVAL_VARIANTS",
           "POOLS", "WORDS", "TAKES", "RATE"]

ACCENTS = ("gmw/en", "gmw/en-US", "gmw/en-GB-scotland", "gmw/en-GB-x-rp", "gmw/en-GB-x-gbclan",
           "gmw/en-GB-x-gbcwmd", "gmw/en-029", "gmw/en-US-nyc")
TRAIN_VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m6", "f1", "f2", "f3", "klatt", "klatt2", "klatt3", "Andy", "Annie",
                  "Gene", "Jacky", "Mario", "Mike", "antonio", "belinda", "ed", "john", "linda", "max", "pablo",
                  "paul", "quincy", "rob", "steph", "travis", "grandpa")
EVAL_VARIANTS = ("m7", "m8", "f4", "f5", "klatt4", "klatt5", "Alex", "Andrea", "Denis", "Lee", "Michael", "aunty",
                 "gustave", "marcelo", "michel", "norbert", "pedro", "robert", "shelby", "victor")
POOLS = {"train": ("tts", 1, TRAIN_VARIANTS), "eval": ("unheard", 2, EVAL_VARIANTS)}  # name prefix, seed, variants
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
TAKES = 10  # recordings of each digit by each voice
RATE = 8000  # Hz, FSDD's
BEFORE, AFTER = 0.02, 0.08  # seconds of silence kept before and after a recording's sound
SOUND_DB = 40.0  # a 20 ms frame is sound when within this many dB of the recording's loudest
GENERATOR = 2  # bumped whenever the recordings made from the same settings change (2: breath noise seeded)


@dataclass(frozen=True)
class Voice:
    """One synthetic speaker: eSpeak NG's ``accent`` + ``variant``, its pitch and intonation range (0-99, 50 the
    variant's own), rate (words per minute) and speech power (dB of full scale), and the generator it was drawn from
    (``seed``, ``index``: its takes are drawn from the same one)."""

    name: str
    accent: str
    variant: str
    pitch: int
    range: int
    rate: int
    level_db: float
    seed: int
    index: int

    @property
    def espeak(self) -> str:
        return f"{self.accent}+{self.variant}"


def voices(n: int, pool: str = "train") -> list[Voice]:
    """The first ``n`` voices of ``pool`` (``POOLS``): voice i is the same whatever ``n``."""
    if pool not in POOLS:
        raise ValueError(f"synthetic voices: `pool` must be one of {sorted(POOLS)}, got {pool!r}")
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"synthetic voices: `n` must be a whole number >= 0, got {n!r}")
    prefix, seed, variants = POOLS[pool]
    order = np.random.default_rng(seed).permutation(len(variants))
    out = []
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        out.append(Voice(f"{prefix}{i:02d}", ACCENTS[int(rng.integers(len(ACCENTS)))],
                         variants[int(order[i % len(variants)])], int(rng.integers(20, 81)), int(rng.integers(20, 81)),
                         int(rng.integers(140, 206)), round(float(rng.uniform(-30, -22)), 2), seed, i))
    return out


def _takes(voice: Voice, takes: int) -> list[tuple[int, int, Say]]:
    """[(digit, take, request)] of ``voice``, each take's rate x 0.9-1.1, pitch +-6, range +-10."""
    rng = np.random.default_rng([voice.seed, voice.index, 1])
    out = []
    for take in range(takes):
        for digit, word in enumerate(WORDS):
            rate, pitch, spread = rng.uniform(0.9, 1.1), rng.uniform(-6, 6), rng.uniform(-10, 10)
            out.append((digit, take, Say(voice.espeak, word, int(round(voice.rate * rate)),
                                         int(np.clip(round(voice.pitch + pitch), 0, 99)),
                                         int(np.clip(round(voice.range + spread), 0, 99)))))
    return out


@lru_cache(maxsize=4)
def _lowpass(up: int, down: int) -> np.ndarray:
    """The filter ``scipy.signal.resample_poly`` designs for ``up`` / ``down`` by default, designed once."""
    from scipy.signal import firwin

    return firwin(2 * 10 * max(up, down) + 1, 1.0 / max(up, down), window=("kaiser", 5.0))


def _finish(wave: np.ndarray, rate: int, level_db: float) -> np.ndarray:
    """int16 samples at the synthesiser's ``rate`` -> int16 at 8 kHz with ``BEFORE`` seconds of silence before its
    sound and ``AFTER`` after (cut, or zeros added: eSpeak NG leaves 0-11 ms before a word and about 6 ms after),
    at the level."""
    from scipy.signal import resample_poly

    x = wave.astype(np.float64) / 32768.0
    if rate != RATE:
        g = int(np.gcd(rate, RATE))
        x = resample_poly(x, RATE // g, rate // g, window=_lowpass(RATE // g, rate // g))
    db, hop = frame_energy_db(x, RATE)
    if len(db) and db.max() > -100:
        sound = np.flatnonzero(db > db.max() - SOUND_DB)
        start, end = int(sound[0]) * hop - int(BEFORE * RATE), int(sound[-1]) * hop + RATE // 50 + int(AFTER * RATE)
        x = np.concatenate([np.zeros(max(0, -start)), x[max(0, start):end], np.zeros(max(0, end - len(x)))])
    x = set_level(x.astype(np.float32), RATE, level_db)
    return (np.clip(x, -1.0, 32767 / 32768) * 32768.0).round().astype(np.int16)


def _key(voice: Voice, plan: list[tuple[int, int, Say]], engine: Engine) -> tuple[str, dict]:
    spec = {"generator": GENERATOR, "engine": engine.version, "rate": RATE, "trim": [BEFORE, AFTER, SOUND_DB],
            "level_db": voice.level_db, "says": [[d, t, *asdict(s).values()] for d, t, s in plan]}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32], spec


def _cached(npz: Path, manifest: Path, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        about = json.loads(manifest.read_text(encoding="utf-8"))
        if about.get("sha256") != sha256_file(npz):
            return None
        samples, lengths = read_npz(npz, ("samples", "lengths"), what="synthetic voices", missing="")
    except (OSError, ValueError):
        return None
    return (samples, lengths) if len(lengths) == n and int(lengths.sum()) == len(samples) else None


def voice_recordings(voice: Voice, *, takes: int = TAKES, engine: Engine | None = None,
                     cache: str | Path | None = None) -> list[Recording]:
    """``voice`` saying each digit ``takes`` times (take-major order), from the cache (``cache``, default
    ``cache_dir("tts")``) or made and cached."""
    if not isinstance(takes, int) or not 1 <= takes <= 1000:
        raise ValueError(f"synthetic voices: `takes` must be a whole number in [1, 1000], got {takes!r}")
    engine = engine or find_engine()
    plan = _takes(voice, takes)
    key, spec = _key(voice, plan, engine)
    folder = Path(cache) if cache is not None else cache_dir("tts")
    npz, manifest = folder / f"{key}.npz", folder / f"{key}.json"
    found = _cached(npz, manifest, len(plan))
    if found is None:
        rate, waves = synthesise([s for _, _, s in plan], engine)
        parts = [_finish(w, rate, voice.level_db) for w in waves]
        found = np.concatenate(parts), np.array([len(p) for p in parts], dtype=np.int64)
        write_npz(npz, samples=found[0], lengths=found[1])
        about = {**spec, "voice": asdict(voice), "synthesiser": str(engine), "sha256": sha256_file(npz)}
        write_atomic(manifest, lambda f: f.write(json.dumps(about, indent=1) + "\n"), text=True)
    samples, lengths = found
    ends = np.cumsum(lengths)
    return [Recording(f"{d}_{voice.name}_{t}.wav", d, voice.name, t,
                      samples[end - n:end].astype(np.float32) / np.float32(32768.0))
            for (d, t, _), n, end in zip(plan, lengths.tolist(), ends.tolist(), strict=True)]


def recordings(n: int, pool: str = "train", *, takes: int = TAKES, cache: str | Path | None = None,
               each: Callable[[Voice], object] | None = None) -> list[Recording]:
    """Every recording of the first ``n`` voices of ``pool`` (``voices``); ``each(voice)`` is called as each voice is
    ready (a progress bar). Raises ``attnkit.data.espeak.EspeakNotFound`` without eSpeak NG (when ``n`` > 0)."""
    chosen = voices(n, pool)
    engine = find_engine() if chosen else None
    out: list[Recording] = []
    for v in chosen:
        out += voice_recordings(v, takes=takes, engine=engine, cache=cache)
        if each is not None:
            each(v)
    return out
