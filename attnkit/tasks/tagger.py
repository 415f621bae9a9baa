"""Sequence labelling from CoNLL-U (UPOS by default, XPOS optional): a Transformer tagger from scratch."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import torch

from ..data.conllu import EWT_FILES, UPOS, TaggedSentence, ewt_path, read_conllu
from ..data.words import split_words
from ..models.tagger import PretrainedTagger, Tagger, TaggerConfig
from ..nn import TransformerConfig
from ..train import IGNORE, Task
from ..train.from_meta import listed, model_from_meta
from . import subword
from .options import attention_words
from .options.tagger import NAME

PAD, UNK = 0, 1
MAX_CHARS = 20


def build_vocab(sents: list[TaggedSentence], min_freq: int) -> dict:
    words = Counter(w.lower() for s in sents for w in s.words)
    chars = Counter(c for s in sents for w in s.words for c in w)
    tags = sorted({t for s in sents for t in s.tags})
    return {"words": ["<pad>", "<unk>"] + sorted(w for w, n in words.items() if n >= min_freq),
            "chars": ["<pad>", "<unk>"] + sorted(chars), "labels": tags}


def _chars(word: str) -> str:
    return word if len(word) <= MAX_CHARS else word[:MAX_CHARS // 2] + word[-MAX_CHARS // 2:]


class Encoded:
    """Turns words (and tags) into id tensors with a checkpoint's vocabulary."""

    def __init__(self, meta: dict):
        self.w = {w: i for i, w in enumerate(meta["words"])}
        self.c = {c: i for i, c in enumerate(meta["chars"])}
        self.t = {t: i for i, t in enumerate(meta["labels"])}
        self.labels = meta["labels"]
        self.pretrained = meta.get("pretrained")

    def words(self, words) -> tuple[torch.Tensor, torch.Tensor]:
        wid = torch.tensor([self.w.get(w.lower(), UNK) for w in words])
        width = max(len(_chars(w)) for w in words)
        cid = torch.zeros(len(words), width, dtype=torch.long)
        for i, w in enumerate(words):
            cs = _chars(w)
            cid[i, :len(cs)] = torch.tensor([self.c.get(c, UNK) for c in cs])
        return wid, cid

    def sentence(self, s: TaggedSentence):
        wid, cid, tags = self._sentence(s)
        if self.pretrained:
            return subword.example(self.pretrained, s.words, tags)
        return wid, cid, tags

    def _sentence(self, s: TaggedSentence):
        if not s.words:
            raise ValueError(f"{s.source}:{s.line}: a sentence without words")
        unknown = [i for i, t in enumerate(s.tags) if t not in self.t]
        if unknown:
            i = unknown[0]
            line = s.lines[i] if i < len(s.lines) else s.line
            raise ValueError(f"{s.source}:{line}: label {s.tags[i]!r} is not in the model's label set "
                             f"{self.labels}")
        wid, cid = self.words(s.words)
        return wid, cid, torch.tensor([self.t[t] for t in s.tags])


def collate(examples):
    """[(words (L,), chars (L, C), tags (L,))] -> padded (B, Lmax), (B, Lmax, Cmax), lengths (B,), (B, Lmax)."""
    b, lmax = len(examples), max(len(e[0]) for e in examples)
    cmax = max(e[1].shape[1] for e in examples)
    words = torch.zeros(b, lmax, dtype=torch.long)
    chars = torch.zeros(b, lmax, cmax, dtype=torch.long)
    tags = torch.full((b, lmax), IGNORE, dtype=torch.long)
    for i, (w, c, t) in enumerate(examples):
        words[i, :len(w)], chars[i, :len(w), :c.shape[1]], tags[i, :len(t)] = w, c, t
    return words, chars, torch.tensor([len(e[0]) for e in examples]), tags


def make_forward(word_dropout: float):
    def forward(model, batch):
        words, chars, lengths, tags = batch
        if model.training and word_dropout > 0:
            drop = (torch.rand(words.shape) < word_dropout) & (words != PAD)
            words = words.masked_fill(drop, UNK)
        scores = model(words, chars, lengths)
        return scores.reshape(-1, scores.shape[-1]), tags.reshape(-1)

    return forward


def _default(path, split, args):
    if path is not None:
        return path
    return ewt_path(split, args.data_dir, download=args.download)


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    train_path = _default(args.train, "train", args)
    dev_path = _default(args.dev, "dev", args) if args.dev or args.train is None else None
    test_path = _default(args.test, "test", args) if args.test or args.train is None else None
    train = read_conllu(train_path, args.field, limit=args.limit)
    dev = read_conllu(dev_path, args.field, limit=args.limit) if dev_path else []
    vocab = {**build_vocab(train, args.min_freq), "pretrained": args.pretrained}
    known = set(UPOS) if args.field == "upos" else set()  # UPOS is a fixed set; a tag only in dev is kept too
    vocab["labels"] = sorted(set(vocab["labels"]) | {t for s in dev for t in s.tags} | known)
    enc = Encoded(vocab)
    cfg = TaggerConfig(vocab_size=len(vocab["words"]), char_vocab_size=len(vocab["chars"]),
                       num_tags=len(vocab["labels"]), encoder=encoder)
    torch.manual_seed(seed)
    if args.pretrained:
        model = PretrainedTagger(subword.fresh_model(args.pretrained), len(vocab["labels"]))
        fwd, col = subword.forward, subword.collate
    else:
        model, fwd, col = Tagger(cfg), make_forward(args.word_dropout), collate
    from tqdm.auto import tqdm

    train_x = [enc.sentence(s) for s in tqdm(train, desc="encode train", leave=False,
                                             disable=not getattr(args, "progress", True))]
    dev_x = [enc.sentence(s) for s in dev] if dev_path else None
    test_x = [enc.sentence(s) for s in read_conllu(test_path, args.field, limit=args.limit)] if test_path else None
    meta = {"model": cfg.to_dict(), **vocab, "field": args.field, "train_file": str(train_path),
            "dataset": "ud_english_ewt" if args.train is None else None}
    return Task(NAME, model, train_x, col, fwd, dev=dev_x, test=test_x, meta=meta,
                lengths=[len(x[0]) for x in train_x])


def load(folder: Path, meta: dict):
    """The run's model; its sizes in meta.json checked against the weights, its vocabularies against its sizes."""
    labels = listed(folder, meta, "labels", None)
    if meta.get("pretrained"):
        subword.encoder(meta["pretrained"])  # loaded (and checked) before the model is built from it
        model = model_from_meta(folder, meta, lambda: PretrainedTagger(subword.fresh_model(meta["pretrained"]),
                                                                        len(labels)))
        return model.eval()
    model = model_from_meta(folder, meta, lambda: Tagger(TaggerConfig.from_dict(meta["model"])))
    cfg = model.config
    for key, size in (("words", cfg.vocab_size), ("chars", cfg.char_vocab_size), ("labels", cfg.num_tags)):
        listed(folder, meta, key, size)
    return model.eval()


def task_for(model, meta: dict, args=None) -> Task:
    if meta.get("pretrained"):
        return Task(NAME, model, [None], subword.collate, subword.forward, meta=meta)
    return Task(NAME, model, [None], collate, make_forward(0.0), meta=meta)


def evaluation_data(meta: dict, path, args=None):
    """``path``: a CoNLL-U file; None = EWT test for a run trained on EWT (an error for other runs)."""
    if path is None:
        if not (meta.get("dataset") == "ud_english_ewt"
                or Path(meta.get("train_file", "")).name.startswith(EWT_FILES["train"][0])):
            raise ValueError(f"evaluate: this tagger was trained on {meta.get('train_file')}, not UD English EWT; "
                             "give the file to score with --data FILE.conllu")
        path = ewt_path("test", getattr(args, "data_dir", None), download=getattr(args, "download", False))
    field = getattr(args, "field", None) or meta.get("field", "upos")
    enc = Encoded(meta)
    return [enc.sentence(s) for s in read_conllu(path, field)]


@torch.no_grad()
def tag(model, meta: dict, words: list[str], need_weights: bool = False):
    if meta.get("pretrained"):
        ids, first = subword.split(meta["pretrained"], words)
        out = model(ids[None], torch.tensor([len(ids)]), need_weights=need_weights)
    else:
        wid, cid = Encoded(meta).words(words)
        out = model(wid[None], cid[None], torch.tensor([len(words)]), need_weights=need_weights)
        first = list(range(len(words)))
    scores, attn = out if need_weights else (out, None)
    best = scores[0].argmax(-1).tolist()
    tags = [meta["labels"][best[p]] for p in first] + ["X"] * (len(words) - len(first))
    return (tags, attn) if need_weights else tags


def predict(model, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    """Each input is raw text, split into words as UD English EWT splits them (``data.words``). With ``out_dir``:
    the attention of every layer (PNG, the HTML page) and the lecture page; a fine-tuned encoder's are over its
    word pieces ([CLS] i saw a saw [SEP]), the model's own tokens."""
    lines = []
    for k, text in enumerate(inputs):
        words = split_words(text)
        if not words:
            raise ValueError(f"predict: input {k + 1} is empty")
        maps = out_dir is not None
        tokens = words
        if maps and meta.get("pretrained"):  # the encoder's pieces of the words, as it attends over them
            tokens = subword.encoder(meta["pretrained"]).tokenizer.encode(list(words), is_pretokenized=True).tokens
        if maps:
            attention_words(tokens, k)
        tags, attn = tag(model, meta, words, need_weights=True) if maps else (tag(model, meta, words), None)
        lines.append(" ".join(f"{w}/{t}" for w, t in zip(words, tags)))
        if maps:
            from ..viz import attention_grid, attention_html
            from ..viz.lecture import model_lecture_html

            stacked = torch.stack([a[0] for a in attn])  # layers x (1, H, L, L) -> (N, H, L, L)
            figures, written = getattr(args, "figures", "both"), []  # predict --figures html|png|both
            if figures != "html":
                written.append(attention_grid(stacked, Path(out_dir) / f"attention_{k}.png", tokens=tokens,
                                              title=text))
            if figures != "png":
                written.append(attention_html(stacked, tokens, Path(out_dir) / f"attention_{k}.html",
                                              title=lines[-1]))
                written.append(model_lecture_html(model, lambda ws=words: tag(model, meta, ws), tokens,
                                                  Path(out_dir) / f"lecture_{k}.html",
                                                  title=f"{lines[-1]}: step by step"))
            lines.append("wrote " + " and ".join(filter(None, [", ".join(map(str, written[:-1])), str(written[-1])])))
    return lines
