"""``attnkit train graph``'s options and what ``attnkit evaluate`` says of a graph run, in a module without torch
(``train graph --help`` reads it): the graph attention network's defaults, the encoder fields it offers, its own
options. ``attnkit.tasks.graph`` builds, trains and loads the model."""

from __future__ import annotations

import argparse

from ...data.planetoid import NAMES
from ...models.configs.graph import GraphAttentionConfig
from ...nn.limits import floats, ints
from . import add_config_args, add_data_args

NAME = "graph"
HELP = "node classification on Planetoid citation graphs (Cora, CiteSeer, PubMed) with edge-only attention"
ENCODER_DEFAULTS = dict(d_model=64, num_heads=8, dropout=0.6, attention_dropout=0.6)
TRAIN_DEFAULTS = dict(epochs=300, batch_size=1, lr=0.005, weight_decay=0.0, schedule="constant", warmup_steps=0,
                      clip_norm=0.0, eval_batch_size=1, log_every=10)
ENCODER_FIELDS = ("d_model", "num_heads", "dropout", "attention_dropout")
ENCODER_NOTE = "the GAT's first layer: --num-heads heads of --d-model / --num-heads units each"
EVALUATION_DATA = "graph: train, dev or test nodes of the run's graph (default: test)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", choices=NAMES, default="cora", help="which Planetoid citation graph")
    add_data_args(p, "planetoid/", "fetch missing files from kimiyoung/planetoid into the cache")
    add_config_args(p, GraphAttentionConfig, only=("score", "qk_source", "value_dropout", "link_loss",
                                                   "link_negatives"), title="graph attention")
    p.add_argument("--out-heads", type=ints(1, 1024), default=None,
                   help="attention heads of the output layer, averaged (default: 1; 8 for pubmed)")
    p.add_argument("--l2", type=floats(0, 10), default=None,
                   help="L2 on all weights, added to the gradient as in the GAT paper (default: 5e-4; 1e-3 for "
                        "pubmed)")
    p.add_argument("--dense-features", action="store_true",
                   help="keep the node features dense (default: a sparse CSR matrix)")
