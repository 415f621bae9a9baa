"""The utterance sets of a speech recognition run, made again from its meta: train, dev and the test sets.

- ``recordings``: recordings held out, utterances of FSDD's test recordings (index 0-4) of the training
  speakers, none of which is in a training utterance;
- ``speaker``: speaker held out (runs trained with ``--holdout-speaker``), utterances of every recording of
  that speaker.

The dev and test sets have fixed seeds, the same for every run; the training set's seed is the run's.
A TSV file (``path<TAB>transcript`` per line, an optional header, paths relative to the file) is scored too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..data.audio import FeatureConfig, log_mel
from ..data.digits import DigitsConfig, DigitUtterances, pools
from ..data.fsdd import load_fsdd
from ..data.sound import read_audio
from ..models.asr import BOS, EOS, digit_tokens
from ..train.progress import ticker

__all__ = ["set_meta", "test_names", "make_sets", "examples", "named_sets", "read_tsv", "SEEDS"]

SEEDS = {"dev": 1_000_001, "recordings": 1_000_002, "speaker": 1_000_003}  # the same for every run
TITLES = {"recordings": "recordings held out", "speaker": "speaker held out", "dev": "dev"}


def set_meta(args, seed: int) -> dict:
    return {"digits": DigitsConfig().to_dict(), "holdout_speaker": args.holdout_speaker,
            "utterances": {"train": args.train_utterances, "dev": args.dev_utterances, "test": args.test_utterances},
            "train_seed": seed}


def test_names(meta: dict) -> tuple[str, ...]:
    return ("recordings", "speaker") if meta.get("holdout_speaker") else ("recordings",)


def make_sets(meta: dict, names, *, path=None, download: bool = False, root=None) -> dict[str, DigitUtterances]:
    """{name: DigitUtterances} for names among train, dev, recordings, speaker."""
    recs = load_fsdd(path, download=download, root=root)
    pool = pools(recs, meta.get("holdout_speaker"))
    cfg = DigitsConfig.from_dict(meta["digits"])
    n = meta["utterances"]
    out = {}
    for name in names:
        if name == "speaker" and not meta.get("holdout_speaker"):
            raise ValueError("evaluate: this run was trained on every speaker, so it has no speaker-held-out test "
                             "set (train with --holdout-speaker NAME)")
        source = {"recordings": "test", "speaker": "test_speaker"}.get(name, name)
        count = n["test"] if name in ("recordings", "speaker") else n[name]
        seed = meta["train_seed"] if name == "train" else SEEDS[name]
        out[name] = DigitUtterances(pool[source], count, seed, cfg)
    return out


def examples(utterances, features: FeatureConfig, what: str = "utterances", *,
             bars: bool | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """[(log-mel frames (T, n_mels), tokens BOS + digits + END)] of every utterance (on one thread: short
    transforms only lose time handing work between threads), with a bar or plain lines (``bars``) saying how
    far ``prepare WHAT`` is."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tick = ticker(f"prepare {what}", len(utterances), "utterances", bars=bars)
    out = []
    try:
        for u in utterances:
            out.append((log_mel(u.samples, features), torch.tensor([BOS, *digit_tokens(u.digits), EOS])))
            tick.update()
        return out
    finally:
        tick.close()
        torch.set_num_threads(threads)


def read_tsv(path: str | Path) -> tuple[list[Path], list[list[int]]]:
    """A TSV of ``path<TAB>transcript`` (``attnkit asr generate`` writes one) -> (WAV paths, digit lists)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"evaluate: --data {path}: no such file (expected test, recordings, speaker, dev or a TSV)")
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


def named_sets(meta: dict, data: str, args=None) -> dict[str, tuple[list[np.ndarray], list[list[int]]]]:
    """{title: (samples of each utterance, reference digits)} for ``--data``."""
    rate = FeatureConfig(**meta["features"]).sample_rate
    if data not in ("test", "recordings", "speaker", "dev"):
        wavs, refs = read_tsv(data)
        return {str(data): ([read_audio(w, rate) for w in wavs], refs)}
    names = test_names(meta) if data == "test" else (data,)
    sets = make_sets(meta, names, download=getattr(args, "download", False), root=getattr(args, "data_dir", None))
    out = {}
    for name, utts in sets.items():
        title = TITLES[name] + (f" ({meta['holdout_speaker']})" if name == "speaker" else "")
        out[title] = ([u.samples for u in utts], [list(u.digits) for u in utts])
    return out
