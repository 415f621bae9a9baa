"""What the autoregressive and the non-autoregressive translation tasks share: ``Decoding`` and the run's files.

``attnkit train translate`` trains one of two models on the same data, vocabulary and stacks: an autoregressive
``Seq2SeqModel`` (``translate_ar.py``) or a non-autoregressive ``NATModel`` (``translate_nat.py``, with
``--decoder nat``). Each is a ``Decoding``: what differs between them (its model and config classes, its
translator, its own options, how a task of it is built and scored). ``translate.py``, the task itself, reads
``--decoder`` (or a run's meta) and hands everything else to that side; the two sides know only this base.

Here too: the parallel corpora, the run's BPE vocabulary (``bpe.json``, checked by its sha256), the checks of a
translation run's meta.json, and loading a run as its translator (``load_run``).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from ..data.bpe import BPE_LIMIT, Subwords
from ..data.jsonfile import regular_file
from ..data.multi30k import Corpus, multi30k, read_parallel
from ..inference.dtypes import DTYPES, DType
from ..train import Task
from ..train import distributed as dist
from ..train.checkpoint import META, CheckpointError, sha256
from ..train.from_meta import model_from_meta

__all__ = ["Decoding", "BPE_FILE", "corpora", "dev_bleu", "check_meta", "check_lengths",
           "subwords_for", "load_run"]

BPE_FILE = "bpe.json"


class Decoding:
    """One side of the translate task (see the module doc). ``name`` is ``--decoder``'s value and meta.json's
    ``decoder``; ``model_class``, ``config_class`` and ``translator_class`` are what a run of it holds."""

    def __init__(self, name: str, model_class: type, config_class: type, translator_class: type):
        self.name, self.model_class, self.config_class = name, model_class, config_class
        self.translator_class = translator_class

    def check_arguments(self, args) -> None:
        """ValueError for an option of the other side."""

    def subwords(self, args) -> Subwords | None:
        """The vocabulary to train with when the run does not learn its own (None: learn it)."""
        return None

    def build(self, name: str, args, fields: dict, subwords: Subwords, train: Corpus, dev: Corpus | None, meta: dict,
              seed: int) -> Task:
        """The training task ``name``: the model of ``fields`` (``Seq2SeqConfig``'s), its data and its meta."""
        raise NotImplementedError

    def task_for(self, model, meta: dict, name: str) -> Task:
        """A task around a loaded model (``evaluate``'s loss)."""
        raise NotImplementedError

    def final_kwargs(self, beam: int) -> dict:
        """How ``finish`` translates the dev set (``--final-beam``)."""
        return {}


def corpora(args) -> tuple[Corpus, Corpus | None]:
    """(training pairs, dev pairs or None): the files given, or Multi30k's train and val."""
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


def dev_bleu(decoding: Decoding, subwords: Subwords, meta: dict, dev: Corpus,
             progress: bool | None = False) -> Callable[[torch.nn.Module], dict]:
    """``Task.score`` for ``--select bleu``: translate the dev sources with the model being trained, as ``finish``
    does after training (greedy; a NAT run with its own defaults), and give sacreBLEU's corpus score,
    ``{"bleu": x}`` (fairseq's ``--best-checkpoint-metric bleu``). The model's train / eval mode is kept.
    ``progress`` (the main process's only): a bar counting the dev texts translated, None plain lines at least every
    10 s (for a log), False nothing."""
    try:
        import sacrebleu
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("--select bleu needs `sacrebleu`: pip install 'attnkit[translate]'") from e
    kwargs = decoding.final_kwargs(1)

    def score(model: torch.nn.Module) -> dict:
        was = model.training
        try:
            with warnings.catch_warnings():  # a dev text's unknown characters: not again at every evaluation
                warnings.simplefilter("ignore")
                shown = progress if dist.is_main() else False
                hyps = decoding.translator_class(model, subwords, meta).translate(dev.src, progress=shown, **kwargs)
        finally:
            model.train(was)
        return {"bleu": float(sacrebleu.metrics.BLEU().corpus_score(hyps, [dev.tgt]).score)}

    return score


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


def check_lengths(folder: Path, meta: dict, config) -> None:
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


def load_run(folder: Path, meta: dict, decoding: Decoding, dtype: DType = DTYPES["float32"]):
    """A run of ``decoding`` as its translator (model in eval mode + its BPE vocabulary), weights in ``dtype``'s
    (a row of the dtype table, checked where the user gave it; int8: float32 weights, the engine's layers in int8,
    docs/int8.md)."""
    subwords = subwords_for(folder, meta)
    model = model_from_meta(folder, meta,  # sizes checked against the weights before the config is built
                            lambda: decoding.model_class(decoding.config_class.from_dict(meta["model"])))
    check_lengths(folder, meta, model.config)
    top = max(subwords.tokenizer.get_vocab(with_added_tokens=True).values(), default=0)
    rows = min(model.config.src_vocab_size, model.config.tgt_vocab_size)
    if top >= rows:  # an id past the embedding tables: refused here, never an IndexError while translating
        raise CheckpointError(f"checkpoint: the {BPE_FILE} of {folder} has ids up to {top}, its model's tables "
                              f"{rows} rows")
    return decoding.translator_class(model.to(dtype.weights), subwords, meta, dtype=dtype)
