"""Translation on Multi30k (or any parallel text files): a Transformer encoder-decoder from scratch.

``attnkit train translate --out runs/de-en`` learns a joint BPE vocabulary on the training split (saved
as ``bpe.json`` in the run folder), trains ``models.seq2seq.Seq2SeqModel`` with label smoothing and
batches of a token budget, optionally averages the last checkpoints, then reports sacreBLEU and chrF
on the validation set. ``attnkit translate RUN "..."`` and ``attnkit evaluate RUN --data test`` use
``Translator`` (``translator.py``), which ``attnkit.load_pretrained(RUN)`` returns.

The model is autoregressive (``translate_ar.py``) or, with ``--decoder nat``, non-autoregressive
(``translate_nat.py``): two sides of ``translation.Decoding``, which this module picks by ``--decoder`` or by a
run's meta.json and hands the rest to. What they share (corpora, the BPE vocabulary, the run's checks, loading a
run) is ``translation.py``'s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..data.bpe import BOS_ID, EOS_ID, PAD_ID, Subwords, learn_bpe
from ..data.multi30k import LANGS, SPLITS, multi30k, read_parallel, split_name
from ..inference.dtypes import DTYPES, DType
from ..nn import TransformerConfig
from ..nn.limits import ints
from ..train import Task
from ..train.checkpoint import sha256
from . import translate_ar, translate_nat
from .options import LIMIT, add_data_args
from .translate_ar import collate, encode_pair, forward
from .translation import (
    BPE_FILE,
    SELECT,
    Decoding,
    check_lengths,
    check_meta,
    corpora,
    dev_bleu,
    load_run,
    subwords_for,
)
from .translator import Translator, bleu_report

__all__ = ["DECODINGS", "build", "load", "score", "predict", "finish", "task_for", "encode_pair", "collate", "forward",
           "BPE_FILE", "subwords_for", "check_meta", "check_lengths"]

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
LOADS_AS_MODEL = True  # attnkit.load_pretrained(RUN) returns load(...): a Translator
DECODINGS: dict[str, Decoding] = {"ar": translate_ar.AR, "nat": translate_nat.NAT}  # by --decoder / meta["decoder"]


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
    translate_nat.add_arguments(p)  # --decoder, and the non-autoregressive side's own options


def _subwords(args, decoding: Decoding, train, bpe_path: Path) -> Subwords:
    """The run's vocabulary: a resumed run's own, the side's (NAT --init: the starting run's), or learned on the
    training split; saved as bpe.json."""
    if getattr(args, "resume", False) and bpe_path.exists():
        return Subwords.load(bpe_path)  # the vocabulary the checkpoints were trained with
    subwords = decoding.subwords(args) or learn_bpe(train.src + train.tgt, args.vocab_size)
    subwords.save(bpe_path)
    return subwords


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    if args.src == args.tgt and not args.train_src:
        raise ValueError(f"train translate: --src and --tgt are both {args.src!r}")
    if args.max_length < 4:
        raise ValueError(f"train translate: --max-length must be >= 4, got {args.max_length}")
    decoding = DECODINGS[args.decoder]
    decoding.check_arguments(args)
    train, dev = corpora(args)
    bpe_path = Path(args.out) / BPE_FILE
    subwords = _subwords(args, decoding, train, bpe_path)
    stack = encoder.replace(num_decoder_layers=args.num_decoder_layers, max_len=max(encoder.max_len, args.max_length))
    fields = dict(src_vocab_size=subwords.size, tgt_vocab_size=subwords.size, transformer=stack,
                  pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                  share_embeddings=args.share_embeddings, tie_output=True, max_positions=args.max_length)
    meta = {"src_lang": args.src if not args.train_src else str(args.train_src),
            "tgt_lang": args.tgt if not args.train_tgt else str(args.train_tgt), "subwords": BPE_FILE,
            "subwords_sha256": sha256(bpe_path), "max_length": args.max_length,
            "average": args.average, "final_beam": args.final_beam}
    task = decoding.build(NAME, args, fields, subwords, train, dev, meta, seed)
    ctc = args.decoder == "nat" and getattr(args, "nat_loss", None) == "ctc"
    select = args.select or ("bleu" if ctc else "accuracy")
    if select == "bleu":
        if dev is None:
            raise ValueError("train translate: --select bleu needs dev pairs (--dev-src and --dev-tgt)")
        task.score, task.select = dev_bleu(decoding, subwords, task.meta, dev), "bleu"
    return task


def load(folder: Path, meta: dict, *, dtype: DType = DTYPES["float32"]) -> Translator:
    """The run as its side's translator: a ``Translator`` (model in eval mode + its BPE vocabulary), a NAT run a
    ``NATTranslator``. ``dtype``: the weights' dtype, a row of ``attnkit.inference.dtypes``' table (checked where
    the user gave it: ``load_pretrained``, ``--dtype``): float32 (as trained), bfloat16 (half the bytes read per
    decoding step, for fast CPU inference) or int8 (docs/int8.md)."""
    return load_run(folder, meta, DECODINGS[check_meta(folder, meta)], dtype)


def task_for(model, meta: dict, args=None) -> Task:
    return DECODINGS[meta.get("decoder", "ar")].task_for(model.model, meta, NAME)


def evaluation_data(meta: dict, path, args=None):
    raise ValueError("evaluate: translation runs are scored with BLEU (attnkit evaluate RUN --data test)")


def score(translator: Translator, meta: dict, args, generate_kwargs: dict) -> list[str]:
    """``attnkit evaluate RUN --data test``: sacreBLEU and chrF on a Multi30k split or ``--data SRC --ref TGT``."""
    data = args.data or "test"
    if args.ref is not None:
        corpus = read_parallel(data, args.ref)
        name = str(data)
    else:
        if meta["src_lang"] not in LANGS or meta["tgt_lang"] not in LANGS:
            raise ValueError("evaluate: this run was trained on your own files; give --data SOURCE --ref REFERENCE")
        try:
            split = split_name(data)
        except ValueError:
            raise ValueError(f"evaluate: --data must be a Multi30k split ({', '.join(SPLITS)}, or test / val) or a "
                             f"source file with --ref; got {data!r}") from None
        corpus = multi30k(split, meta["src_lang"], meta["tgt_lang"])
        name = f"multi30k {split} {meta['src_lang']}->{meta['tgt_lang']}"
    if corpus.skipped:
        print(f"warning: {corpus.source}: skipped {corpus.skipped} pairs with an empty side", file=sys.stderr)
    # a progress bar on a terminal (or as --progress / --no-progress say), nothing in a piped log
    progress = sys.stderr.isatty() if getattr(args, "progress", None) is None else args.progress
    return bleu_report(translator, corpus.src, corpus.tgt, name=name, progress=progress, **generate_kwargs)


def predict(translator: Translator, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    return translator.translate(inputs)


def finish(args, task: Task, result: dict) -> list[str]:
    """After training: average the last checkpoints (``--average``), then BLEU on the dev texts."""
    from ..train.average import average_checkpoints
    from ..train.checkpoint import load_meta
    from ..train.progress import bars_wanted

    out, lines = Path(args.out), []
    if result.get("interrupted"):
        return lines
    n = task.meta.get("average", 0)
    if n > 1:
        folder, used = average_checkpoints(out, n)
        lines.append(f"averaged {len(used)} checkpoint{'s' if len(used) != 1 else ''} ({used[0].name} .. "
                     f"{used[-1].name}) into {folder}")
    _, dev = corpora(args)
    if dev is not None:
        folder, meta = load_meta(out, which="best")
        kw = DECODINGS[meta.get("decoder", "ar")].final_kwargs(task.meta.get("final_beam", 0) or 1)
        bars = bars_wanted(getattr(args, "progress", None)) or None  # a bar, else plain lines in a log
        lines += bleu_report(load(folder, meta), dev.src, dev.tgt, name=f"dev ({folder.name})", progress=bars, **kw)
    return lines
