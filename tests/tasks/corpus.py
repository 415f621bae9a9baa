"""A tiny generated parallel corpus: word-for-word "German" -> "English" with the verb moved to the end."""

from __future__ import annotations

import random
from pathlib import Path

LEXICON = {"ein": "a", "mann": "man", "frau": "woman", "hund": "dog", "kind": "child", "rotes": "red",
           "großes": "big", "fahrrad": "bike", "auto": "car", "sieht": "sees", "fährt": "rides", "hat": "has",
           "ball": "ball", "kleines": "small", "haus": "house"}
NOUNS = ["mann", "frau", "hund", "kind", "fahrrad", "auto", "ball", "haus"]
ADJ = ["rotes", "großes", "kleines"]
VERBS = ["sieht", "fährt", "hat"]


def pair(rng: random.Random) -> tuple[str, str]:
    subj, obj = rng.choice(NOUNS), rng.choice(NOUNS)
    adj = [rng.choice(ADJ)] if rng.random() < 0.5 else []
    verb = rng.choice(VERBS)
    de = ["ein", subj, verb, "ein", *adj, obj]
    en = ["a", LEXICON[subj], LEXICON[verb], "a", *[LEXICON[a] for a in adj], LEXICON[obj]]
    return " ".join(de).capitalize() + ".", " ".join(en).capitalize() + "."


def write_corpus(folder: Path, n_train: int = 400, n_dev: int = 40, seed: int = 0) -> dict[str, Path]:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, n in (("train", n_train), ("dev", n_dev)):
        pairs = [pair(rng) for _ in range(n)]
        for side, k in (("src", 0), ("tgt", 1)):
            p = folder / f"{split}.{side}"
            p.write_text("\n".join(x[k] for x in pairs) + "\n", encoding="utf-8")
            paths[f"{split}_{side}"] = p
    return paths
