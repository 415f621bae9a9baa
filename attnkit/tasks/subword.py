"""First-subword labelling for fine-tuning a pretrained encoder on a tagging task.

Words are split by the encoder's tokenizer (``is_pretokenized``); the label of a word sits on its
first subword and the others get ``IGNORE``. Predictions are read back at the first subwords.
Sentences longer than the encoder's limit are truncated: their last words are then not scored.
"""

from __future__ import annotations

import copy

import torch

from ..train import IGNORE

_LOADED: dict = {}


def encoder(name: str):
    """``attnkit.load_pretrained(name)``, loaded once per process."""
    if name not in _LOADED:
        from ..pretrained import load_pretrained

        _LOADED[name] = load_pretrained(name, fast=False)
    return _LOADED[name]


def fresh_model(name: str):
    """A trainable copy of the pretrained BertModel."""
    return copy.deepcopy(encoder(name).model).train()


def split(name: str, words) -> tuple[torch.Tensor, list[int]]:
    """ids (S,) and the index of each word's first subword (words cut by truncation are left out)."""
    enc = encoder(name).tokenizer.encode(list(words), is_pretokenized=True)
    first, seen = [], set()
    for pos, w in enumerate(enc.word_ids):
        if w is not None and w not in seen:
            seen.add(w)
            first.append(pos)
    return torch.tensor(enc.ids), first


def example(name: str, words, tag_ids) -> tuple[torch.Tensor, torch.Tensor]:
    ids, first = split(name, words)
    labels = torch.full((len(ids),), IGNORE, dtype=torch.long)
    labels[torch.tensor(first, dtype=torch.long)] = torch.as_tensor(tag_ids[:len(first)], dtype=torch.long)
    return ids, labels


def collate(examples):
    lengths = torch.tensor([len(e[0]) for e in examples])
    ids = torch.zeros(len(examples), int(lengths.max()), dtype=torch.long)
    labels = torch.full(ids.shape, IGNORE, dtype=torch.long)
    for i, (x, y) in enumerate(examples):
        ids[i, :len(x)], labels[i, :len(y)] = x, y
    return ids, lengths, labels


def forward(model, batch):
    ids, lengths, labels = batch
    scores = model(ids, lengths)
    return scores.reshape(-1, scores.shape[-1]), labels.reshape(-1)
