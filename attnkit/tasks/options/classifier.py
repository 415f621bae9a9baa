"""``attnkit train classifier``'s options and what ``attnkit evaluate`` says of a classifier run, in a module
without torch (``train classifier --help`` reads it): the sentence classifier's defaults, the encoder fields it
offers, its own options. ``attnkit.tasks.classifier`` builds, trains and loads the model."""

from __future__ import annotations

import argparse

from ...models.configs.classifier import ClassifierConfig
from ...nn.limits import ints
from . import LIMIT, PROBABILITY, add_config_args, add_split_files

NAME = "classifier"
HELP = "sequence classification (one label per sentence) from TSV: SST-2 sentiment"
ENCODER_DEFAULTS = dict(d_model=128, num_heads=4, d_ff=256, num_encoder_layers=2, dropout=0.3,
                        norm_first=True, positional="rope")
TRAIN_DEFAULTS = dict(epochs=4, batch_size=64, lr=5e-4, warmup_steps=300, weight_decay=0.05,
                      schedule="linear", eval_batch_size=256)
ENCODER_FIELDS = ("d_model", "num_heads", "d_ff", "num_encoder_layers", "dropout", "attention_dropout",
                  "activation", "norm_first", "positional")
ENCODER_NOTE = "the model trained from scratch; not used with --pretrained"
EVALUATION_DATA = "classifier: a text<TAB>label TSV file (default: SST-2 dev, for runs trained on SST-2)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_split_files(p, "text<TAB>label TSV", "SST-2", "sst2/", "fetch SST-2 from GLUE into the cache if missing",
                    test="none; SST-2's test labels are not public")
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                   help="lowercase the text before splitting it into tokens at spaces")
    p.add_argument("--min-freq", type=ints(0, 10**9), default=1, help="tokens seen fewer times in train are <unk>")
    p.add_argument("--word-dropout", type=PROBABILITY, default=0.1,
                   help="probability of replacing a token by <unk> while training (0 = never)")
    add_config_args(p, ClassifierConfig, only=("pooling",), title="classifier")
    p.add_argument("--max-tokens", type=ints(1, 65536), default=128, help="keep only the first N tokens of a text")
    p.add_argument("--limit", type=LIMIT, default=None, metavar="N",
                   help="use only the first N rows of each file (default: all)")
    p.add_argument("--pretrained", default=None, metavar="NAME",
                   help="fine-tune a pretrained encoder (e.g. all-MiniLM-L6-v2) instead of training from scratch "
                        "(default: none)")
    p.add_argument("--pretrained-dropout", type=PROBABILITY, default=0.0, metavar="P",
                   help="with --pretrained: BERT's fine-tuning dropout on hidden states and attention weights "
                        "(its configs say 0.1; default 0)")
