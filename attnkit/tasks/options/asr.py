"""``attnkit train asr``'s options and what ``attnkit evaluate`` says of a asr run, in a module without torch
(``train asr --help`` reads it): the speech recogniser's defaults, the encoder fields it offers, its own options.
``attnkit.tasks.asr`` builds, trains and loads the model."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...data.features import FeatureConfig
from ...models.configs.asr import STREAMING_WINDOW, AsrConfig
from ...nn.limits import floats, ints
from . import add_config_args, add_data_args, add_window_arg
from .augment import AugmentConfig
from .voices import TITLE as VOICES_TITLE
from .voices import VoicesConfig

NAME = "asr"
HELP = ("speech recognition of connected spoken digits (FSDD): convolutions, truncated self-attention encoder, "
        "autoregressive decoder and CTC head")
TRAIN_DEFAULTS = dict(epochs=3, batch_size=32, lr=1.5e-3, warmup_steps=500, weight_decay=0.01, schedule="cosine",
                      label_smoothing=0.1, eval_every=500, eval_batch_size=64, keep=1, log_every=50)
ENCODER_FIELDS = ("d_model", "num_heads", "d_ff", "num_encoder_layers", "dropout", "attention_dropout",
                  "activation", "norm_first")
ENCODER_DEFAULTS = {f: getattr(AsrConfig().encoder, f) for f in ENCODER_FIELDS}  # the model config's, not a copy
ADVERSARY_SCALE = floats(0, 100)  # --speaker-adversarial
ENCODER_NOTE = "the encoder's stack; the decoder has the same width (--num-decoder-layers sets its depth)"
EVALUATION_DATA = ("asr: test (both test sets the run has), recordings, speaker, dev, dev-speaker, tts (synthetic "
                   "voices never heard; needs eSpeak NG), or a TSV of WAV path and transcript (default: test); digit "
                   "error rate and utterance accuracy")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None, metavar="PATH",
                   help="FSDD: recordings.tar.gz, a folder of WAVs, or a folder holding either "
                        "(default: <data dir>/fsdd/recordings.tar.gz)")
    add_data_args(p, "fsdd/", "fetch FSDD from GitHub into the cache if missing")
    p.add_argument("--holdout-speaker", default=None, metavar="NAME",
                   help="train on the other speakers and test on this one too (default: none, all six speakers "
                        "train; the test set is their held-out recordings)")
    p.add_argument("--mix-speakers", type=floats(0, 1), default=0.0, metavar="P",
                   help="each digit of a training utterance said by another speaker, drawn anew, with probability P "
                        "(dev and test utterances keep one speaker each): the digits around one then do not tell whose "
                        "voice it is (0: one speaker per utterance)")
    p.add_argument("--speaker-adversarial", type=ADVERSARY_SCALE, default=0.0, metavar="SCALE",
                   help="speaker-adversarial training: a head learns which training speaker says each step of what "
                        "the CTC head reads, and its gradient, reversed and times SCALE, pushes the encoder to hide it "
                        "(Ganin and Lempitsky 2015; not with --mix-speakers) (0: off)")
    p.add_argument("--dev-speaker", default=None, metavar="NAME",
                   help="keep this speaker out of training too and score the run on it at the end (and with "
                        "evaluate --data dev-speaker): a voice to choose settings on that is not the test speaker's "
                        "(default: none)")
    for name, n, what in (("train", 35000, "training"), ("dev", 500, "dev (best checkpoint)"),
                          ("test", 1000, "each test set's")):
        p.add_argument(f"--{name}-utterances", type=ints(1, 10**7), default=n, metavar="N",
                       help=f"{what} utterances generated")
    add_window_arg(p, AsrConfig, streaming=STREAMING_WINDOW)
    p.add_argument("--streaming", action="store_true",
                   help="a streaming model: causal convolutions, a window with no right context (L,0), features "
                        "normalised by the training set's statistics instead of each utterance's")
    p.add_argument("--normalize", choices=("utterance", "training"), default="utterance",
                   help="log-mel features normalised per bin by each utterance's own mean and variance, or by "
                        "the training set's (always training with --streaming: an utterance's own statistics are "
                        "unknown until it ends); utterance made 4-10 points fewer digit errors on two speakers "
                        "held out, training 0.4-0.6 fewer on known voices (docs/asr.md) (default: utterance)")
    add_config_args(p, AsrConfig, only=("subsample", "frontend", "channels", "kernel", "ctc_weight", "ctc_layer"),
                    title="speech recognition model")
    p.add_argument("--num-decoder-layers", type=ints(1, 64), default=2, help="decoder layers")
    add_config_args(p, FeatureConfig, only=("n_mels", "cepstra"), title="features")
    add_config_args(p, AugmentConfig, title="augmentation (each training utterance changed anew every epoch)")
    add_config_args(p, VoicesConfig, title=VOICES_TITLE)
