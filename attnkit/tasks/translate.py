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
from ..train import Task
from ..train.checkpoint import sha256
from . import translate_ar, translate_nat
from .options.translate import NAME
from .translate_ar import collate, encode_pair, forward
from .translation import (
    BPE_FILE,
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

LOADS_AS_MODEL = True  # attnkit.load_pretrained(RUN) returns load(...): a Translator
DECODINGS: dict[str, Decoding] = {"ar": translate_ar.AR, "nat": translate_nat.NAT}  # by --decoder / meta["decoder"]


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
        from ..train.progress import bars_wanted

        bars = bars_wanted(getattr(args, "progress", None)) or None  # a bar, else plain lines in a log
        task.score, task.select = dev_bleu(decoding, subwords, task.meta, dev, progress=bars), "bleu"
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
    # a progress bar on a terminal (or as --progress / --no-progress say), else plain lines at least every 10 s
    from ..train.progress import bars_wanted

    progress = bars_wanted(getattr(args, "progress", None)) or None
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
