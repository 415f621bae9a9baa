"""Translation on Multi30k (or any parallel text files): a Transformer encoder-decoder from scratch.

``attnkit train translate --out runs/de-en`` learns a joint BPE vocabulary on the training split (saved
as ``bpe.json`` in the run folder), trains ``models.seq2seq.Seq2SeqModel`` with label smoothing and
batches of a token budget, optionally averages the last checkpoints, then reports sacreBLEU and chrF
on the validation set. ``attnkit translate RUN "..."`` and ``attnkit evaluate RUN --data test`` use
``Translator`` (``translator.py``), which ``attnkit.load_pretrained(RUN)`` returns.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ..data.bpe import BOS_ID, BPE_LIMIT, EOS_ID, PAD_ID, Subwords, learn_bpe
from ..data.jsonfile import regular_file
from ..data.multi30k import LANGS, SPLITS, Corpus, multi30k, read_parallel, split_name
from ..models.seq2seq import Seq2SeqConfig, Seq2SeqModel
from ..nn import TransformerConfig
from ..nn.limits import ints
from ..train import IGNORE, Task
from ..train.checkpoint import META, CheckpointError, sha256
from ..train.from_meta import model_from_meta
from . import translate_nat
from .options import LIMIT, add_data_args
from .translator import Translator, bleu_report

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
BPE_FILE = "bpe.json"
LOADS_AS_MODEL = True  # attnkit.load_pretrained(RUN) returns load(...): a Translator


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
    translate_nat.add_arguments(p)


def _corpora(args) -> tuple[Corpus, Corpus | None]:
    own = [args.train_src, args.train_tgt]
    if any(own) and not all(own):
        raise ValueError("train translate: give both --train-src and --train-tgt")
    if all(own):
        train = read_parallel(args.train_src, args.train_tgt, limit=args.limit)
        dev = read_parallel(args.dev_src, args.dev_tgt, limit=args.limit) if args.dev_src and args.dev_tgt else None
    else:
        train = multi30k("train", args.src, args.tgt, args.data_dir, download=args.download, limit=args.limit)
        dev = multi30k("val", args.src, args.tgt, args.data_dir, download=args.download, limit=args.limit)
    for name, c in (("train", train), ("dev", dev)):
        if c is not None and c.skipped:
            print(f"warning: {name}: skipped {c.skipped} pairs with an empty side (lines "
                  f"{', '.join(map(str, c.empty_lines[:5]))}{' ...' if c.skipped > 5 else ''})", file=sys.stderr)
    return train, dev



def encode_pair(subwords: Subwords, src: str, tgt: str, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(source ids + EOS, BOS + target ids + EOS), each cut to ``max_length`` subwords first."""
    s = subwords.encode(src)[: max_length - 1] + [EOS_ID]
    t = [BOS_ID] + subwords.encode(tgt)[: max_length - 1] + [EOS_ID]
    return torch.tensor(s), torch.tensor(t)


def collate(examples):
    """[(src (S_i,), tgt (T_i,))] -> src (B, S), src mask (B, S), decoder input (B, T-1), labels (B, T-1)."""
    b = len(examples)
    s_max = max(len(e[0]) for e in examples)
    t_max = max(len(e[1]) for e in examples)
    src = torch.full((b, s_max), PAD_ID, dtype=torch.long)
    tgt = torch.full((b, t_max), PAD_ID, dtype=torch.long)
    for i, (s, t) in enumerate(examples):
        src[i, :len(s)], tgt[i, :len(t)] = s, t
    labels = tgt[:, 1:].masked_fill(tgt[:, 1:] == PAD_ID, IGNORE)
    return src, (src != PAD_ID).long(), tgt[:, :-1], labels


def forward(model, batch):
    src, mask, dec_in, labels = batch
    keep = labels != IGNORE
    return model(src, mask, dec_in, positions=keep), labels[keep]  # (N, V), (N,): padding never reaches the output


def model_config(meta: dict) -> Seq2SeqConfig:
    if meta.get("decoder", "ar") == "nat":
        return translate_nat.NATConfig.from_dict(meta["model"])
    return Seq2SeqConfig.from_dict(meta["model"])


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    if args.src == args.tgt and not args.train_src:
        raise ValueError(f"train translate: --src and --tgt are both {args.src!r}")
    if args.max_length < 4:
        raise ValueError(f"train translate: --max-length must be >= 4, got {args.max_length}")
    translate_nat.check_arguments(args)
    train, dev = _corpora(args)
    out = Path(args.out)
    bpe_path = out / BPE_FILE
    if getattr(args, "resume", False) and bpe_path.exists():
        subwords = Subwords.load(bpe_path)  # the vocabulary the checkpoints were trained with
    elif args.decoder == "nat" and getattr(args, "init", None) is not None:
        subwords = translate_nat.init_subwords(args.init)  # the starting run's: its embedding rows are these
        subwords.save(bpe_path)
    else:
        subwords = learn_bpe(train.src + train.tgt, args.vocab_size)  # the training split only
        subwords.save(bpe_path)
    stack = encoder.replace(num_decoder_layers=args.num_decoder_layers, max_len=max(encoder.max_len, args.max_length))
    fields = dict(src_vocab_size=subwords.size, tgt_vocab_size=subwords.size, transformer=stack,
                  pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                  share_embeddings=args.share_embeddings, tie_output=True, max_positions=args.max_length)
    meta = {"src_lang": args.src if not args.train_src else str(args.train_src),
            "tgt_lang": args.tgt if not args.train_tgt else str(args.train_tgt), "subwords": BPE_FILE,
            "subwords_sha256": sha256(bpe_path), "max_length": args.max_length,
            "average": args.average, "final_beam": args.final_beam}
    if args.decoder == "nat":  # the teacher's translations as targets (or the corpus's own), Mask-Predict training
        tgt, note = translate_nat.targets(args, train, out)
        cfg = translate_nat.config(args, fields)
        meta = {"model": cfg.to_dict(), **meta, **translate_nat.nat_meta(args, note)}
        dev_pairs = list(zip(dev.src, dev.tgt)) if dev else None
        task = translate_nat.make_task(NAME, cfg, subwords, list(zip(train.src, tgt)), dev_pairs, args.max_length,
                                       meta, seed)
        if getattr(args, "init", None) is not None and not (getattr(args, "resume", False) and bpe_path.exists()):
            translate_nat.initialise(task.model, args.init)  # (a resumed run loads its own checkpoint instead)
        return task
    cfg = Seq2SeqConfig(**fields)
    torch.manual_seed(seed)
    model = Seq2SeqModel(cfg)
    meta = {"model": cfg.to_dict(), **meta}
    train_x = [encode_pair(subwords, s, t, args.max_length) for s, t in zip(train.src, train.tgt)]
    dev_x = [encode_pair(subwords, s, t, args.max_length) for s, t in zip(dev.src, dev.tgt)] if dev else None
    return Task(NAME, model, train_x, collate, forward, dev=dev_x, meta=meta,
                lengths=[max(len(s), len(t)) for s, t in train_x])


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # the weights' dtypes a run loads in


def load(folder: Path, meta: dict, *, dtype: torch.dtype = torch.float32) -> Translator:
    """The run as a ``Translator`` (model in eval mode + its BPE vocabulary); a NAT run as a ``NATTranslator``.

    ``dtype``: the weights' dtype, ``torch.float32`` (as trained) or ``torch.bfloat16`` (half the bytes read
    per decoding step, for fast CPU inference)."""
    if dtype not in DTYPES.values():
        raise ValueError(f"load_pretrained: `dtype` of a translation run must be torch.float32 or torch.bfloat16, "
                         f"got {dtype}")
    nat = check_meta(folder, meta) == "nat"
    subwords = subwords_for(folder, meta)
    kind = translate_nat.NATModel if nat else Seq2SeqModel
    model = model_from_meta(folder, meta, lambda: kind(model_config(meta)))  # sizes checked against the weights
    check_lengths(folder, meta, model.config)
    top = max(subwords.tokenizer.get_vocab(with_added_tokens=True).values(), default=0)
    rows = min(model.config.src_vocab_size, model.config.tgt_vocab_size)
    if top >= rows:  # an id past the embedding tables: refused here, never an IndexError while translating
        raise CheckpointError(f"checkpoint: the {BPE_FILE} of {folder} has ids up to {top}, its model's tables "
                              f"{rows} rows")
    return (translate_nat.NATTranslator if nat else Translator)(model.to(dtype), subwords, meta)


def _meta_error(folder: Path, key: str, want: str, got) -> CheckpointError:
    return CheckpointError(f"checkpoint: {Path(folder) / META}: `{key}` must be {want}, got {got!r:.80}")


def check_meta(folder: Path, meta: dict) -> str:
    """The entries of a translation run's meta.json that are not sizes of the model -> its decoder ("ar", "nat")."""
    decoder = meta.get("decoder", "ar")
    if decoder not in ("ar", "nat"):
        raise _meta_error(folder, "decoder", "'ar' or 'nat'", decoder)
    if meta.get("subwords") != BPE_FILE:  # a name, never a path: the vocabulary is the run's own file
        raise _meta_error(folder, "subwords", repr(BPE_FILE), meta.get("subwords"))
    digest = meta.get("subwords_sha256")
    if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise _meta_error(folder, "subwords_sha256", f"the sha256 of {BPE_FILE} (64 hex digits)", digest)
    for key in ("src_lang", "tgt_lang"):
        if not isinstance(meta.get(key), str):
            raise _meta_error(folder, key, "a string", meta.get(key))
    return decoder


def check_lengths(folder: Path, meta: dict, config: Seq2SeqConfig) -> None:
    """``max_length`` (and a NAT run's default decoding) within the model's positions."""
    n = config.max_positions
    ml = meta.get("max_length", n)
    if not isinstance(ml, int) or isinstance(ml, bool) or not 2 <= ml <= n:
        raise _meta_error(folder, "max_length", f"an integer in [2, {n}] (the model's positions)", ml)
    if meta.get("decoder") == "nat":
        d = meta.get("nat_decoding", {})
        if not isinstance(d, dict):
            raise _meta_error(folder, "nat_decoding", "a JSON object", d)
        for key in ("iterations", "length_candidates"):
            v = d.get(key, 1)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= n:
                raise _meta_error(folder, f"nat_decoding.{key}", f"an integer in [1, {n}]", v)


def subwords_for(folder: Path, meta: dict) -> Subwords:
    """The run's BPE vocabulary: ``bpe.json`` in the run folder (or the checkpoint folder), by that name only,
    checked against the sha256 in the meta."""
    folder = Path(folder)
    check_meta(folder, meta)
    for cand in (folder / BPE_FILE, folder.parent / BPE_FILE):
        if cand.exists() or cand.is_symlink():
            regular_file(cand, BPE_LIMIT)
            if sha256(cand) != meta["subwords_sha256"]:
                raise CheckpointError(f"checkpoint: {cand} is not the vocabulary {folder} was trained with "
                                      "(sha256 differs)")
            return Subwords.load(cand)
    raise CheckpointError(f"checkpoint: {folder} needs its subword vocabulary {BPE_FILE} in "
                          f"{folder.parent}, which is missing")


def task_for(model, meta: dict, args=None) -> Task:
    if meta.get("decoder", "ar") == "nat":
        return translate_nat.task_for(model.model, meta, NAME)
    return Task(NAME, model.model, [None], collate, forward, meta=meta)


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
    # a progress bar on a terminal, nothing in a piped log
    return bleu_report(translator, corpus.src, corpus.tgt, name=name, progress=sys.stderr.isatty(), **generate_kwargs)


def predict(translator: Translator, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    return translator.translate(inputs)


def finish(args, task: Task, result: dict) -> list[str]:
    """After training: average the last checkpoints (``--average``), then BLEU on the dev texts."""
    from ..train.average import average_checkpoints
    from ..train.checkpoint import load_meta

    out, lines = Path(args.out), []
    if result.get("interrupted"):
        return lines
    n = task.meta.get("average", 0)
    if n > 1:
        folder, used = average_checkpoints(out, n)
        lines.append(f"averaged {len(used)} checkpoints ({used[0].name} .. {used[-1].name}) into {folder}")
    _, dev = _corpora(args)
    if dev is not None:
        folder, meta = load_meta(out, which="best")
        beam = task.meta.get("final_beam", 0) or 1
        kw = {} if meta.get("decoder", "ar") == "nat" else {"num_beams": beam}  # NAT: the run's iterations
        lines += bleu_report(load(folder, meta), dev.src, dev.tgt, name=f"dev ({folder.name})", **kw)
    return lines
