"""``attnkit train tagger``'s options and what ``attnkit evaluate`` says of a tagger run, in a module without torch
(``train tagger --help`` reads it): the part-of-speech tagger's defaults, the encoder fields it offers, its own
options. ``attnkit.tasks.tagger`` builds, trains and loads the model."""

from __future__ import annotations

import argparse

from ...data.conllu import FIELDS
from ...nn.limits import ints
from . import LIMIT, PROBABILITY, add_split_files

NAME = "tagger"
HELP = "sequence labelling (one label per word) from CoNLL-U: part-of-speech tagging"
ENCODER_DEFAULTS = dict(d_model=128, num_heads=4, d_ff=256, num_encoder_layers=2, dropout=0.2,
                        norm_first=True, positional="rope")
TRAIN_DEFAULTS = dict(epochs=20, batch_size=32, lr=1e-3, warmup_steps=400, weight_decay=0.01,
                      schedule="linear", eval_batch_size=128)
ENCODER_FIELDS = ("d_model", "num_heads", "d_ff", "num_encoder_layers", "dropout", "attention_dropout",
                  "activation", "norm_first", "positional")
ENCODER_NOTE = "the model trained from scratch; not used with --pretrained"
EVALUATION_DATA = "tagger: a CoNLL-U file (default: UD English EWT test, for runs trained on EWT)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_split_files(p, "CoNLL-U", "UD English EWT", "ud_english_ewt/",
                    "fetch UD English EWT from its GitHub release into the cache if missing",
                    test="EWT test when --train is not given, else none")
    p.add_argument("--field", choices=FIELDS, default="upos", help="which tag column to learn")
    p.add_argument("--min-freq", type=ints(0, 10**9), default=2,
                   help="words seen fewer times in train are <unk> (their characters still count)")
    p.add_argument("--word-dropout", type=PROBABILITY, default=0.05,
                   help="probability of replacing a word by <unk> while training (0 = never)")
    p.add_argument("--limit", type=LIMIT, default=None, metavar="N",
                   help="use only the first N sentences of each file (default: all)")
    p.add_argument("--pretrained", default=None, metavar="NAME",
                   help="fine-tune a pretrained encoder (e.g. all-MiniLM-L6-v2) with first-subword labelling "
                        "(default: none, train from scratch)")
