"""``attnkit train speech``'s options and what ``attnkit evaluate`` says of a speech run, in a module without torch
(``train speech --help`` reads it): the spoken digit classifier's defaults, the encoder fields it offers, its own
options. ``attnkit.tasks.speech`` builds, trains and loads the model."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...data.features import FeatureConfig
from ...models.configs.speech import SpeechConfig
from . import add_config_args, add_data_args, add_window_arg

NAME = "speech"
HELP = "spoken digit classification (FSDD): log-mel frames, Transformer encoder with truncated self-attention"
ENCODER_DEFAULTS = dict(d_model=96, num_heads=4, d_ff=192, num_encoder_layers=4, dropout=0.1,
                        activation="gelu", norm_first=True, positional="sinusoidal")
TRAIN_DEFAULTS = dict(epochs=30, batch_size=32, lr=2e-3, warmup_steps=200, weight_decay=0.05,
                      schedule="cosine", label_smoothing=0.1, eval_batch_size=128)
ENCODER_FIELDS = ("d_model", "num_heads", "d_ff", "num_encoder_layers", "dropout", "attention_dropout",
                  "activation", "norm_first", "positional")
EVALUATION_DATA = ("speech: train or test of the run's FSDD split, or recordings (an archive or a folder of WAVs) "
                   "(default: test)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None, metavar="PATH",
                   help="recordings.tar.gz, a folder of WAVs, or a folder holding either "
                        "(default: <data dir>/fsdd/recordings.tar.gz)")
    add_data_args(p, "fsdd/", "fetch the dataset from GitHub into the cache if missing")
    add_window_arg(p, SpeechConfig)
    add_config_args(p, SpeechConfig, only=("subsample",), title="speech model")
    add_config_args(p, FeatureConfig, only=("n_mels",), title="features")
    p.add_argument("--holdout-speaker", default=None, metavar="NAME",
                   help="test on every recording of this speaker, train on the others (default: the official "
                        "split, index 0-4 = test)")
    p.add_argument("--dev", action="store_true",
                   help="carve a dev set out of train (index 5-9) for best-checkpoint selection")
    p.add_argument("--no-augment", dest="augment", action="store_false",
                   help="train without SpecAugment-style time and frequency masking")
