"""``attnkit train translate``'s options and what ``attnkit evaluate`` says of a translate run, in a module without
torch (``train translate --help`` reads it): the translation model's defaults, the encoder fields it offers, its own
options. ``attnkit.tasks.translate`` builds, trains and loads the model."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from ...data.multi30k import LANGS
from ...models.configs.nat import LENGTH_STRATEGIES, NAT_LOSSES, NATConfig
from ...nn.decoding_ranges import MASK_PREDICT as NAT_RANGES
from ...nn.limits import floats, ints
from . import LIMIT, add_data_args

NAME = "translate"
HELP = "translation (encoder-decoder from scratch) on Multi30k or parallel text files: De->En by default"
ENCODER_DEFAULTS = dict(d_model=256, num_heads=4, d_ff=1024, num_encoder_layers=3, num_decoder_layers=3,
                        dropout=0.25, attention_dropout=0.0, norm_first=True, positional="sinusoidal")
TRAIN_DEFAULTS = dict(epochs=30, max_minutes=60.0, batch_size=128, batch_tokens=3000, lr=1e-3, warmup_steps=400,
                      schedule="inverse_sqrt", weight_decay=0.0, label_smoothing=0.1, eval_every=150,
                      eval_batch_size=128, keep=5, bf16=False, log_every=50)
ENCODER_FIELDS = ("d_model", "num_heads", "d_ff", "num_encoder_layers", "dropout", "attention_dropout", "activation",
                  "norm_first", "positional")
ENCODER_NOTE = "the encoder-decoder; --num-decoder-layers sets the decoder's depth"
EVALUATION_DATA = ("translate: a Multi30k split (test, val, train) or a source file with --ref (default: test); "
                   "sacreBLEU and chrF")
SELECT = ("accuracy", "bleu")  # --select: the dev metrics a translation run can pick its best checkpoint by
_NAT_FIELDS = {f.name: f for f in fields(NATConfig)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src", choices=LANGS, default="de", help="source language (Multi30k)")
    p.add_argument("--tgt", choices=LANGS, default="en", help="target language (Multi30k)")
    p.add_argument("--train-src", type=Path, default=None, metavar="FILE",
                   help="source side of your own training pairs, one sentence a line (default: Multi30k train)")
    p.add_argument("--train-tgt", type=Path, default=None, metavar="FILE",
                   help="target side of --train-src, the same number of lines (default: Multi30k train)")
    p.add_argument("--dev-src", type=Path, default=None, metavar="FILE",
                   help="source side of your own dev pairs (default: Multi30k val, or none with --train-src)")
    p.add_argument("--dev-tgt", type=Path, default=None, metavar="FILE",
                   help="target side of --dev-src (default: Multi30k val, or none with --train-src)")
    add_data_args(p, "multi30k/", "fetch Multi30k from GitHub into the cache if it is missing")
    p.add_argument("--limit", type=LIMIT, default=None, metavar="N",
                   help="use only the first N pairs of each file (default: all)")
    p.add_argument("--vocab-size", type=ints(16, 2**24), default=8000, help="joint BPE vocabulary size")
    p.add_argument("--share-embeddings", action=argparse.BooleanOptionalAction, default=True,
                   help="one embedding table for source, target and output (joint vocabulary)")
    p.add_argument("--num-decoder-layers", type=ints(1, 1024), default=ENCODER_DEFAULTS["num_decoder_layers"],
                   help="decoder layers")
    p.add_argument("--max-length", type=ints(4, 65536), default=128,
                   help="longest source / target in subwords (longer: cut)")
    p.add_argument("--average", type=ints(0, 1000), default=4, metavar="N",
                   help="average the last N checkpoints at the end (0: off); kept as the run's best")
    p.add_argument("--final-beam", type=ints(0, 1024), default=0, metavar="K",
                   help="after training, score the validation set with this beam (0: greedy)")
    p.add_argument("--select", choices=SELECT, default=None,
                   help="the dev metric that picks the run's best checkpoint: accuracy (each target token given the "
                        "ones before it; a CTC run's, on its most likely alignment) or bleu (the dev set translated "
                        "at every evaluation, greedy or the NAT run's own decoding: slower); default bleu with "
                        "--nat-loss ctc, whose token accuracy can fall while its BLEU rises, else accuracy")
    add_nat_arguments(p)  # --decoder, and the non-autoregressive side's own options


def _config_option(g, name: str, **kw) -> None:
    """The option of NATConfig's field ``name``: its help, and its range as the type."""
    f = _NAT_FIELDS[name]
    rng = f.metadata.get("range")
    g.add_argument(f"--{name.replace('_', '-')}", default=f.default, help=f.metadata["help"],
                   **({"type": rng} if rng is not None else {}), **kw)


def add_nat_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("non-autoregressive decoder (--decoder nat)")
    g.add_argument("--decoder", choices=("ar", "nat"), default="ar",
                   help="ar (default): autoregressive (masked self-attention, one token per step); nat: all tokens "
                        "at once (unmasked self-attention, Mask-Predict training and decoding)")
    g.add_argument("--teacher", type=Path, default=None, metavar="RUN",
                   help="nat: train on this autoregressive run's beam-search translations of the training sources "
                        "(sequence-level knowledge distillation; cached in OUT/distill; default: none, the "
                        "corpus's own references)")
    g.add_argument("--distill-beam", type=ints(1, 1024), default=5, help="nat: the teacher's beam size (default 5)")
    g.add_argument("--init", type=Path, default=None, metavar="RUN",
                   help="nat: start from this autoregressive run's best weights and vocabulary (embeddings, "
                        "encoder, decoder; the length classifier starts fresh), as Guo et al. (2020) start NAT "
                        "from a trained autoregressive model; the shapes must match, except that a decoder of "
                        "fewer layers (--num-decoder-layers) takes the run's first ones (default: random weights)")
    g.add_argument("--length", choices=LENGTH_STRATEGIES, default="classifier",
                   help="nat: classifier (default): the output length from a classifier on the encoder output; "
                        "end: a long row, cut at the first END")
    g.add_argument("--length-loss-weight", type=floats(0, 1000), default=0.1,
                   help="nat: weight of the length classifier's loss (default 0.1)")
    _config_option(g, "nat_loss", choices=NAT_LOSSES)
    _config_option(g, "glat_ratio")
    _config_option(g, "ctc_upsample")
    g.add_argument("--iterations", type=NAT_RANGES["iterations"], default=10,
                   help="nat: Mask-Predict iterations the run decodes with by default (default 10; 1: one pass)")
    g.add_argument("--length-candidates", type=NAT_RANGES["length_candidates"], default=3,
                   help="nat: lengths tried per sentence with the classifier, the run's default (default 3)")
