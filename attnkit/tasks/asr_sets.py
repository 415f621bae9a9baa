"""The utterance sets of a speech recognition run, made again from its meta: train, dev and the test sets.

- ``recordings``: recordings held out, utterances of FSDD's test recordings (index 0-4) of the training
  speakers, none of which is in a training utterance;
- ``speaker``: speaker held out (runs trained with ``--holdout-speaker``), utterances of every recording of
  that speaker;
- ``dev_speaker``: a second speaker held out (``--dev-speaker``), scored like a test set but there to choose
  settings on, never the test speaker;
- ``tts``: synthetic voices never heard (``evaluate --data tts``; at the end of runs trained with ``--tts-voices``):
  utterances of the first ``EVAL_VOICES`` voices of ``attnkit.data.synthetic_voices``' eval pool, whose voice
  variants no training voice has.

A run trained with ``--tts-voices N`` adds the first N voices of the synthetic train pool to its training recordings,
a share ``--tts-share`` of its training utterances spoken by one of them (``meta["tts"]``).

The dev and test sets have fixed seeds, the same for every run; the training set's seed is the run's.
A TSV file (``path<TAB>transcript`` per line, an optional header, paths relative to the file) is scored too.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ..data import synthetic_voices
from ..data.audio import FeatureConfig, log_mel
from ..data.digits import DigitsConfig, DigitUtterances, pools
from ..data.espeak import EspeakNotFound, find_engine
from ..data.fsdd import load_fsdd
from ..data.silence import speech_power
from ..data.sound import read_audio
from ..models.asr import BOS, EOS, digit_tokens
from ..train.progress import ticker

__all__ = ["set_meta", "test_names", "report_names", "make_sets", "examples", "named_sets", "sets_of", "read_tsv",
           "TrainingAudio", "SEEDS", "DATA_NAMES", "EVAL_VOICES"]

SEEDS = {"dev": 1_000_001, "recordings": 1_000_002, "speaker": 1_000_003, "dev_speaker": 1_000_004,
         "tts": 1_000_005}  # every run's
TITLES = {"recordings": "recordings held out", "speaker": "speaker held out", "dev": "dev",
          "dev_speaker": "dev speaker held out", "tts": "synthetic voices never heard"}
DATA_NAMES = {"test": "test", "recordings": "recordings", "speaker": "speaker", "dev": "dev",
              "dev-speaker": "dev_speaker", "tts": "tts"}  # evaluate --data WORD -> a set name ("test": every test set)
EVAL_VOICES = 10  # synthetic voices of the ``tts`` test set


def set_meta(args, seed: int, voices=None) -> dict:
    """What a run's sets are made from; ``voices`` (a ``VoicesConfig``) adds ``tts``: the synthetic voices, their share
    and the synthesiser that says them (``find_engine``: EspeakNotFound when there is none)."""
    meta = {"digits": DigitsConfig().to_dict(), "holdout_speaker": args.holdout_speaker,
            "dev_speaker": args.dev_speaker,
            "utterances": {"train": args.train_utterances, "dev": args.dev_utterances, "test": args.test_utterances},
            "train_seed": seed}
    if getattr(args, "mix_speakers", 0.0):
        meta["mix_speakers"] = float(args.mix_speakers)
    if voices is not None and voices.any:
        meta["tts"] = {"voices": voices.tts_voices, "share": voices.tts_share, "takes": synthetic_voices.TAKES,
                       "engine": str(find_engine())}
    return meta


def test_names(meta: dict) -> tuple[str, ...]:
    return ("recordings", "speaker") if meta.get("holdout_speaker") else ("recordings",)


def report_names(meta: dict) -> tuple[str, ...]:
    """The sets a run is scored on when it ends: its test sets, its dev speaker's when it has one, and the synthetic
    voices never heard when it trained with synthetic voices."""
    return test_names(meta) + (("dev_speaker",) if meta.get("dev_speaker") else ()) + (("tts",) if meta.get("tts")
                                                                                      else ())


def make_sets(meta: dict, names, *, path=None, download: bool = False, root=None,
              bars: bool | None = None) -> dict[str, DigitUtterances]:
    """{name: DigitUtterances} for names among train, dev, recordings, speaker, dev_speaker, tts (FSDD read only for
    the others; synthetic voices made or read from their cache, with a bar or plain lines: ``bars``)."""
    fsdd = [name for name in names if name != "tts"]
    recs = load_fsdd(path, download=download, root=root) if fsdd else []
    pool = pools(recs, meta.get("holdout_speaker"), meta.get("dev_speaker")) if fsdd else {}
    cfg = DigitsConfig.from_dict(meta["digits"])
    n, mix = meta["utterances"], float(meta.get("mix_speakers", 0.0))  # training utterances only
    out = {}
    for name in names:
        if name == "speaker" and not meta.get("holdout_speaker"):
            raise ValueError("evaluate: this run was trained on every speaker, so it has no speaker-held-out test "
                             "set (train with --holdout-speaker NAME)")
        if name == "dev_speaker" and not meta.get("dev_speaker"):
            raise ValueError("evaluate: this run has no dev speaker held out (train with --dev-speaker NAME)")
        if name == "tts":
            out[name] = DigitUtterances(voice_recordings(EVAL_VOICES, "eval", bars=bars), n["test"], SEEDS["tts"], cfg)
            continue
        if name == "train" and meta.get("tts"):
            out[name] = with_voices(pool["train"], meta["tts"], n["train"], meta["train_seed"], cfg, bars, mix)
            continue
        source = {"recordings": "test", "speaker": "test_speaker"}.get(name, name)
        count = n["test"] if name in ("recordings", "speaker", "dev_speaker") else n[name]
        seed = meta["train_seed"] if name == "train" else SEEDS[name]
        out[name] = DigitUtterances(pool[source], count, seed, cfg, mix=mix if name == "train" else 0.0)
    return out


def voice_recordings(n: int, pool: str, takes: int = synthetic_voices.TAKES, *, bars: bool | None = None) -> list:
    """The recordings of the first ``n`` synthetic voices of ``pool``, with a bar or plain lines as each is ready."""
    tick = ticker(f"synthetic voices ({pool})", n, "voices", bars=bars)
    try:
        return synthetic_voices.recordings(n, pool, takes=takes, each=lambda voice: tick.update())
    finally:
        tick.close()


def with_voices(fsdd, tts: dict, n: int, seed: int, cfg: DigitsConfig, bars: bool | None = None,
                mix: float = 0.0) -> DigitUtterances:
    """The training utterances of FSDD's ``fsdd`` recordings and ``tts["voices"]`` synthetic voices', a share
    ``tts["share"]`` of them spoken by a synthetic voice (each voice equally likely within its kind)."""
    voices = voice_recordings(tts["voices"], "train", tts["takes"], bars=bars)
    real, made = sorted({r.speaker for r in fsdd}), sorted({r.speaker for r in voices})
    share = float(tts["share"])
    weights = {**{s: (1 - share) / len(real) for s in real}, **{s: share / len(made) for s in made}}
    return DigitUtterances([*fsdd, *voices], n, seed, cfg, weights, mix)


def examples(utterances, features: FeatureConfig, what: str = "utterances", *, bars: bool | None = None,
             watch=None, speakers: list[str] | None = None) -> list[tuple]:
    """[(log-mel frames (T, n_mels), tokens BOS + digits + END)] of every utterance (on one thread: short
    transforms only lose time handing work between threads), with a bar or plain lines (``bars``) saying how
    far ``prepare WHAT`` is; ``watch(utterance)`` sees each one (``TrainingAudio``); with ``speakers``, each
    example ends with its speaker's index among them (``speaker_index``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tick = ticker(f"prepare {what}", len(utterances), "utterances", bars=bars)
    out = []
    try:
        for u in utterances:
            out.append((log_mel(u.samples, features), torch.tensor([BOS, *digit_tokens(u.digits), EOS]),
                        *speaker_index(u, speakers)))
            if watch is not None:
                watch(u)
            tick.update()
        return out
    finally:
        tick.close()
        torch.set_num_threads(threads)


def speaker_index(u, speakers: list[str] | None) -> tuple[int, ...]:
    """(index of utterance u's speaker in ``speakers``,), or () without ``speakers``."""
    if speakers is None:
        return ()
    if u.speaker not in speakers:
        raise ValueError(f"asr: utterance of speaker {u.speaker!r}, who is not among the training speakers {speakers}")
    return (speakers.index(u.speaker),)


class TrainingAudio:
    """What a run keeps of its training utterances' sound, seen once as they are prepared: the longest (seconds, the
    longest piece the transcriber decodes at once) and the median speech power (dB, the level the transcriber brings
    every recording to; ``attnkit.data.silence``)."""

    def __init__(self, rate: int):
        self.rate, self.longest, self.powers = rate, 0, []

    def __call__(self, u) -> None:
        self.longest = max(self.longest, len(u.samples))
        self.powers.append(speech_power(u.samples, self.rate))

    def meta(self) -> dict:
        level = float(np.median(self.powers)) if self.powers else 0.0
        return {"max_seconds": round(self.longest / self.rate, 2),
                "level_db": round(10 * math.log10(level), 2) if level > 0 else None}


def read_tsv(path: str | Path) -> tuple[list[Path], list[list[int]]]:
    """A TSV of ``path<TAB>transcript`` (``attnkit asr generate`` writes one) -> (WAV paths, digit lists)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"evaluate: --data {path}: no such file (expected {', '.join(DATA_NAMES)} or a TSV)")
    wavs, refs = [], []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        cols = line.split("\t")
        if n == 1 and cols[0] == "path" or not line.strip():
            continue
        if len(cols) < 2 or not all(w.isdigit() and len(w) == 1 for w in cols[1].split()):
            raise ValueError(f"{path}, line {n}: expected a WAV path, a tab and digits separated by spaces, "
                             f"got {line[:80]!r}")
        wavs.append(path.parent / cols[0])
        refs.append([int(w) for w in cols[1].split()])
    if not wavs:
        raise ValueError(f"{path}: no utterances")
    return wavs, refs


def title(meta: dict, name: str) -> str:
    """How a set is named in what ``evaluate`` prints: ``speaker held out (george)``."""
    who = {"speaker": meta.get("holdout_speaker"), "dev_speaker": meta.get("dev_speaker"),
           "tts": f"{EVAL_VOICES} voices"}.get(name)
    return TITLES[name] + (f" ({who})" if who else "")


def sets_of(meta: dict, names, args=None, path=None) -> dict[str, tuple[str, list[np.ndarray], list[list[int]]]]:
    """{set name: (title, samples of each utterance, reference digits)} of the run's sets ``names`` (FSDD from
    ``path``, else from ``args``' --data-dir, --download as ``load_fsdd`` finds it)."""
    sets = make_sets(meta, names, path=path, download=getattr(args, "download", False),
                     root=getattr(args, "data_dir", None))
    return {name: (title(meta, name), [u.samples for u in utts], [list(u.digits) for u in utts])
            for name, utts in sets.items()}


def named_sets(meta: dict, data: str, args=None) -> dict[str, tuple[str, list[np.ndarray], list[list[int]]]]:
    """``sets_of`` the sets ``--data`` names (``DATA_NAMES``; test: every test set), or a TSV's (named ``tsv``)."""
    if data not in DATA_NAMES:
        wavs, refs = read_tsv(data)
        rate = FeatureConfig(**meta["features"]).sample_rate
        return {"tsv": (str(data), [read_audio(w, rate) for w in wavs], refs)}
    try:
        return sets_of(meta, test_names(meta) if data == "test" else (DATA_NAMES[data],), args)
    except EspeakNotFound as e:
        raise EspeakNotFound(f"evaluate: --data {data}: {e}") from None
