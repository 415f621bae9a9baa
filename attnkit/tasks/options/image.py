"""``attnkit train image``'s options and what ``attnkit evaluate`` says of a image run, in a module without torch
(``train image --help`` reads it): the image classifier's defaults, the encoder fields it offers, its own options.
``attnkit.tasks.image`` builds, trains and loads the model."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...models.configs.vision import VisionConfig
from ...nn.limits import ints
from . import LIMIT, add_config_args, add_data_args

NAME = "image"
HELP = "image classification: each pixel or patch a vector, plus a class token (digits, MNIST)"
ENCODER_DEFAULTS = dict(d_model=64, num_heads=4, d_ff=128, num_encoder_layers=2, dropout=0.1,
                        activation="gelu", norm_first=True)
TRAIN_DEFAULTS = dict(epochs=60, batch_size=64, lr=3e-3, warmup_steps=100, weight_decay=0.05,
                      schedule="cosine", label_smoothing=0.0, eval_batch_size=256)
# Positions are always learned vectors (one per patch + the class token): --positional is not offered.
ENCODER_FIELDS = ("d_model", "num_heads", "d_ff", "num_encoder_layers", "dropout", "attention_dropout",
                  "activation", "norm_first")
EVALUATION_DATA = "image: train, dev or test of the run's dataset, or a folder of MNIST files (default: test)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", choices=("digits", "mnist"), default="digits",
                   help="digits: scikit-learn's bundled 8x8 digits; mnist: the IDX files in --train")
    p.add_argument("--train", type=Path, default=None, metavar="FOLDER",
                   help="mnist: the folder holding the four IDX files (default: <data dir>/mnist)")
    add_data_args(p, "mnist/", "mnist: fetch the four files into the cache if missing")
    add_config_args(p, VisionConfig, only=("mode",), title="image model")
    p.add_argument("--patch-size", type=ints(1, 1024), default=None,
                   help="side of a square patch in pixels, patches mode (default: 2 for digits, 4 for mnist)")
    p.add_argument("--shift", type=ints(0, 1024), default=0,
                   help="random translation of up to N pixels while training (0 = none)")
    p.add_argument("--limit", type=LIMIT, default=None, metavar="N",
                   help="mnist: use only the first N images of each split (default: all)")
