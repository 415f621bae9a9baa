"""``SpeakersConfig``, the leave-one-speaker-out experiment's settings, and ``QUICK``, its ``--quick`` folds, in a
module without torch: ``attnkit experiment speakers --help`` is built from their fields.
``attnkit.experiments.speakers`` runs the experiment."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ...data.fsdd import SPEAKERS
from ...nn.limits import check_fields, check_unique, ints

__all__ = ["SpeakersConfig", "QUICK", "TINY_OPTIONS", "OWN"]

TINY_OPTIONS = ("--train-utterances", "64", "--dev-utterances", "16", "--test-utterances", "16", "--max-steps", "4",
                "--batch-size", "8", "--eval-every", "4", "--d-model", "32", "--num-heads", "2", "--d-ff", "64",
                "--num-encoder-layers", "2", "--num-decoder-layers", "1")
OWN = ("--out", "--holdout-speaker", "--seed", "--resume", "--overwrite", "--data-dir", "--data-root", "--threads",
       "--progress", "--no-progress")  # options each fold's command sets itself


@dataclass(frozen=True)
class SpeakersConfig:
    """The folds (speakers x seeds) and the options every fold's ``attnkit train asr`` takes."""

    speakers: tuple[str, ...] = field(default=SPEAKERS, metadata={
        "help": "the speakers held out, one fold each (trained on every other speaker of the data set; from Python, "
                "any speakers of a data set laid out as FSDD)", "choices": SPEAKERS})
    seeds: int = field(default=3, metadata={"help": "seeds per fold (0, 1, ...): training utterances, initialisation",
                                            "range": ints(1, 100)})
    train_options: str = field(default="", metadata={
        "help": "more options of `attnkit train asr` for every fold, as one string after an = sign (e.g. "
                "--train-options='--speed-perturb --noise 0.5'); none: the README's defaults"})
    tiny: bool = field(default=False, metadata={
        "help": "tiny folds (a small model, 4 steps, 64 training utterances): checks the pipeline, measures nothing"})

    def __post_init__(self):
        check_fields(self)
        check_unique(self, "speakers")
        if not self.speakers or any(not isinstance(s, str) or not s.isalpha() for s in self.speakers):
            raise ValueError(f"SpeakersConfig: `speakers` must be speakers' names, got {self.speakers!r}")
        try:
            words = shlex.split(self.train_options)
        except ValueError as e:
            raise ValueError(f"SpeakersConfig: `train_options` is not a command line ({e}): "
                             f"{self.train_options!r:.80}") from None
        taken = [w for w in words if w.split("=")[0] in OWN]
        if taken:
            raise ValueError(f"SpeakersConfig: `train_options` may not give {taken[0].split('=')[0]}: each fold sets "
                             f"it ({', '.join(OWN)})")


QUICK = SpeakersConfig(seeds=1, tiny=True)
