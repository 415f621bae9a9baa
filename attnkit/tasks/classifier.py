"""Sequence classification from two-column TSV (SST-2 by default): a Transformer classifier from scratch.

A data file's text is taken as it is written: its words are what spaces separate (SST-2's sentences are
already split the Penn Treebank's way: ``it 's a charming , often affecting journey .``). Raw text given to
``predict`` is split the way the run's training text was (``meta["split"]``): "treebank" when the training
text has its punctuation apart (SST-2; ``data.words.treebank_words``: "A wonderful, moving film." -> a
wonderful , moving film .), "spaces" otherwise. Labels print with their names when the run knows them
(SST-2: 0 negative, 1 positive).
"""

from __future__ import annotations

import argparse
import copy
from collections import Counter
from pathlib import Path

import torch

from ..data.sst2 import LabelledText, read_tsv, sst2_path
from ..data.words import treebank_words
from ..models.bert import set_dropout
from ..models.classifier import ClassifierConfig, PretrainedClassifier, SequenceClassifier
from ..nn import TransformerConfig
from ..train import Task
from ..train.from_meta import listed, model_from_meta
from .options import attention_words
from .options.classifier import NAME

PAD, UNK = 0, 1
SST2_LABEL_NAMES = {"0": "negative", "1": "positive"}  # GLUE's SST-2
PUNCTUATION = frozenset(",.!?;:")


_PRETRAINED: dict = {}


def pretrained(name: str):
    """``attnkit.load_pretrained(name)``, loaded once per process."""
    if name not in _PRETRAINED:
        from ..pretrained import load_pretrained

        _PRETRAINED[name] = load_pretrained(name, fast=False)
    return _PRETRAINED[name]


def text_split(texts: list[str]) -> str:
    """How ``texts`` are split into words: "treebank" when their punctuation mostly stands apart (``film .``),
    else "spaces" (``film.``): what raw text given to ``predict`` is split like."""
    alone = attached = 0
    for text in texts[:5000]:
        for t in text.split():
            alone += t in PUNCTUATION
            attached += len(t) > 1 and t[-1] in PUNCTUATION
    return "treebank" if alone > attached else "spaces"


def split_of(meta: dict) -> str:
    """The run's split of raw text (runs from before it was recorded: SST-2's is the Treebank's)."""
    return meta.get("split") or ("treebank" if meta.get("dataset") == "sst2" else "spaces")


def label_name(meta: dict, label: str) -> str:
    """``label`` as a reader knows it: SST-2's "1" is "positive"; labels without a name stay as they are."""
    names = meta.get("label_names") or (SST2_LABEL_NAMES if meta.get("dataset") == "sst2" else {})
    return names.get(label, label)


def tokenize(text: str, meta: dict, raw: bool = False) -> list[str]:
    """The tokens of ``text``: a data file's text split at spaces; ``raw`` text (``predict``) split the way the
    run's training text was (``split_of``); the pretrained tokenizer's pieces for a fine-tuned encoder."""
    if meta.get("pretrained"):
        enc = pretrained(meta["pretrained"])
        return enc.tokenizer.encode(text.lower() if enc.folder.do_lower_case else text).tokens
    words = treebank_words(text) if raw and split_of(meta) == "treebank" else text.split()
    toks = [w.lower() for w in words] if meta.get("lowercase", True) else words
    return toks[: meta.get("max_tokens", 128)] or ["<unk>"]


class Encoded:
    def __init__(self, meta: dict):
        self.meta = meta
        self.w = {w: i for i, w in enumerate(meta["words"])}
        self.c = {c: i for i, c in enumerate(meta["labels"])}

    def tokens(self, text: str, raw: bool = False) -> torch.Tensor:
        if self.meta.get("pretrained"):
            enc = pretrained(self.meta["pretrained"])
            return torch.tensor(enc.tokenizer.encode(text.lower() if enc.folder.do_lower_case else text).ids)
        return torch.tensor([self.w.get(t, UNK) for t in tokenize(text, self.meta, raw)])

    def row(self, r: LabelledText):
        if r.label not in self.c:
            raise ValueError(f"{r.source}:{r.line}: label {r.label!r} is not in the model's label set "
                             f"{self.meta['labels']}")
        return self.tokens(r.text), self.c[r.label]


def collate(examples):
    lengths = torch.tensor([len(e[0]) for e in examples])
    tokens = torch.zeros(len(examples), int(lengths.max()), dtype=torch.long)
    for i, (t, _) in enumerate(examples):
        tokens[i, :len(t)] = t
    return tokens, lengths, torch.tensor([e[1] for e in examples])


def make_forward(word_dropout: float):
    def forward(model, batch):
        tokens, lengths, labels = batch
        if model.training and word_dropout > 0:
            tokens = tokens.masked_fill((torch.rand(tokens.shape) < word_dropout) & (tokens != PAD), UNK)
        return model(tokens, lengths), labels

    return forward


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    default = args.train is None
    train_path = args.train or sst2_path("train", args.data_dir, download=args.download)
    train = read_tsv(train_path, limit=args.limit)
    dev_path = args.dev or (sst2_path("dev", args.data_dir, download=args.download) if default else None)
    meta = {"lowercase": args.lowercase, "max_tokens": args.max_tokens, "pretrained": args.pretrained,
            "train_file": str(train_path), "dataset": "sst2" if default else None}
    meta["labels"] = sorted({r.label for r in train})
    meta["split"] = text_split([r.text for r in train])  # how predict splits raw text
    if default:
        meta["label_names"] = SST2_LABEL_NAMES
    torch.manual_seed(seed)
    if args.pretrained:
        if not 0.0 <= args.pretrained_dropout < 1.0:
            raise ValueError(f"train classifier: --pretrained-dropout must be in [0, 1), got {args.pretrained_dropout}")
        meta["words"] = []
        bert = set_dropout(copy.deepcopy(pretrained(args.pretrained).model), args.pretrained_dropout,
                           args.pretrained_dropout)
        model = PretrainedClassifier(bert.train(), len(meta["labels"]))
        cfg = None
    else:
        counts = Counter(t for r in train for t in tokenize(r.text, meta))
        meta["words"] = ["<pad>", "<unk>"] + sorted(w for w, n in counts.items() if n >= args.min_freq)
        cfg = ClassifierConfig(vocab_size=len(meta["words"]), num_classes=len(meta["labels"]),
                               pooling=args.pooling, encoder=encoder)
        model = SequenceClassifier(cfg)
    enc = Encoded(meta)
    from tqdm.auto import tqdm

    train_x = [enc.row(r) for r in tqdm(train, desc="encode train", leave=False,
                                        disable=not getattr(args, "progress", True))]
    dev_x = [enc.row(r) for r in read_tsv(dev_path, limit=args.limit)] if dev_path else None
    test_x = [enc.row(r) for r in read_tsv(args.test, limit=args.limit)] if args.test else None
    meta["model"] = cfg.to_dict() if cfg is not None else None
    word_dropout = 0.0 if args.pretrained else args.word_dropout
    return Task(NAME, model, train_x, collate, make_forward(word_dropout), dev=dev_x, test=test_x, meta=meta,
                lengths=[len(x[0]) for x in train_x])


def load(folder: Path, meta: dict):
    """The run's model; its sizes in meta.json checked against the weights, its words and labels against its sizes."""
    labels = listed(folder, meta, "labels", None)
    if meta.get("pretrained"):
        encoder = pretrained(meta["pretrained"]).model  # loaded (and checked) before the model is built from it
        model = model_from_meta(folder, meta, lambda: PretrainedClassifier(copy.deepcopy(encoder), len(labels)))
        return model.eval()
    model = model_from_meta(folder, meta, lambda: SequenceClassifier(ClassifierConfig.from_dict(meta["model"])))
    listed(folder, meta, "words", model.config.vocab_size)
    listed(folder, meta, "labels", model.config.num_classes)
    return model.eval()


def task_for(model, meta: dict, args=None) -> Task:
    return Task(NAME, model, [None], collate, make_forward(0.0), meta=meta)


def evaluation_data(meta: dict, path, args=None):
    """``path``: a TSV file; None = SST-2 dev for a run trained on SST-2 (an error for other runs)."""
    if path is None:
        if meta.get("dataset") != "sst2":
            raise ValueError(f"evaluate: this classifier was not trained on SST-2 (train file: "
                             f"{meta.get('train_file', 'not recorded')}); give the file to score with --data FILE.tsv")
        path = sst2_path("dev", getattr(args, "data_dir", None), download=getattr(args, "download", False))
    enc = Encoded(meta)
    return [enc.row(r) for r in read_tsv(path)]


@torch.no_grad()
def predict(model, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    enc, lines = Encoded(meta), []
    for k, text in enumerate(inputs):
        toks = enc.tokens(text, raw=True)
        if out_dir is not None:
            attention_words(toks, k)
        out = model(toks[None], torch.tensor([len(toks)]), need_weights=out_dir is not None)
        scores, attn = out if out_dir is not None else (out, None)
        p = scores.softmax(-1)[0]
        label = meta["labels"][int(p.argmax())]
        name = label_name(meta, label)
        said = f"{name} (label {label}, p={float(p.max()):.3f})" if name != label else \
            f"{label} (p={float(p.max()):.3f})"
        lines.append(f"{said}\t{text}")
        if out_dir is not None:
            from ..viz import attention_grid, attention_html

            stacked, words = torch.stack([a[0] for a in attn]), tokenize(text, meta, raw=True)  # (N, H, L, L)
            verdict = said  # "positive (label 1, p=...)"
            figures, written = getattr(args, "figures", "both"), []  # predict --figures html|png|both
            if figures != "html":
                written.append(attention_grid(stacked, Path(out_dir) / f"attention_{k}.png", tokens=words,
                                              title=f"{text} -> {verdict}"))
            if figures != "png":
                written.append(attention_html(stacked, words, Path(out_dir) / f"attention_{k}.html",
                                              title=lines[-1]))
            lines.append(f"wrote {' and '.join(map(str, written))}")
    return lines
