"""ListOps (Nangia & Bowman 2018) generated with Long Range Arena's recipe, and read back from TSV.

An example is a nested list of operations over the digits 0-9, e.g. ``[MAX 4 3 [MIN 2 3 ] 1 0 ]``;
its label (10 classes) is the value. Operators: ``[MIN``, ``[MAX``, ``[MED`` (the median, truncated
to an integer as LRA's ``int(np.median(...))``), ``[SM`` (sum modulo 10).

The recipe (LRA's ``lra_benchmarks/data/listops.py``): a node at depth < ``max_depth`` is an
operator with probability 1/4 (otherwise a digit), with 2 .. ``max_args`` arguments drawn
recursively; at ``max_depth`` it is always a digit. A tree's *length* counts digits, operators and
closing brackets, i.e. the tokens written here. Trees are kept when ``min_length < length <
max_length`` (strict, as LRA), duplicates dropped, and the first ``n_train`` / ``n_val`` / ``n_test``
distinct trees form the splits. LRA's defaults: depth 10, 10 arguments, lengths 500-2000, 96,000 /
2,000 / 2,000 examples. The random draws are made in LRA's order from ``random.Random(seed)``
(each from one uniform number, so the trees differ from LRA's, whose generator is unseeded anyway).

Files: ``basic_train.tsv``, ``basic_val.tsv``, ``basic_test.tsv``, tab-separated, header
``Source<TAB>Target``, one expression per line. LRA's own generator writes the same trees in a
binary-tuple form with parentheses (``( ( [MAX 4 ) 3 ) ]``); its input pipeline drops every
non-alphanumeric token (parentheses and ``]``) before training, so it reads these files as its own.
``read_listops`` accepts both forms.
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..nn.limits import SEED, check_fields, check_memory, ints
from .npzfile import write_atomic

__all__ = ["ListOpsConfig", "OPERATORS", "END", "VOCAB", "generate_listops", "write_listops", "read_listops",
           "evaluate_listops", "max_tree_length", "SPLIT_FILES"]

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")  # LRA's order (random.choice draws from it)
END = "]"
VALUE_P = 0.25  # a node below max_depth is an operator with probability VALUE_P
_DIGITS = tuple(str(d) for d in range(10))
VOCAB = ("<pad>", *_DIGITS, *OPERATORS, END)  # token ids: index in this tuple
SPLIT_FILES = {"train": "basic_train.tsv", "val": "basic_val.tsv", "test": "basic_test.tsv"}
COUNT = ints(1, 10**7)  # examples per split
_MAX_ATTEMPTS = 1_000_000  # trees drawn in a row without a new example before giving up (a few seconds)


@dataclass(frozen=True)
class ListOpsConfig:
    """Generator settings; LRA's defaults. Lengths are exclusive bounds: min_length < length < max_length."""

    max_depth: int = field(default=10, metadata={"help": "deepest nesting of operators (LRA: 10)",
                                                 "range": ints(1, 100)})
    max_args: int = field(default=10, metadata={"help": "most arguments of one operator (LRA: 10)",
                                                "range": ints(2, 1000)})
    min_length: int = field(default=500, metadata={"help": "trees have more tokens than this (LRA: 500)",
                                                   "range": ints(0, 10**6)})
    max_length: int = field(default=2000, metadata={"help": "trees have fewer tokens than this (LRA: 2000)",
                                                    "range": ints(2, 10**6)})
    n_train: int = field(default=96_000, metadata={"help": "training expressions (LRA: 96000)", "range": COUNT})
    n_val: int = field(default=2_000, metadata={"help": "validation expressions (LRA: 2000)", "range": COUNT})
    n_test: int = field(default=2_000, metadata={"help": "test expressions (LRA: 2000)", "range": COUNT})
    seed: int = field(default=0, metadata={"help": "seed of the generator: the same seed writes the same files",
                                           "range": SEED})

    def __post_init__(self):
        check_fields(self, "listops")
        if self.max_length - self.min_length < 2:
            raise ValueError(f"listops: no length lies strictly between min_length={self.min_length} and "
                             f"max_length={self.max_length}")
        longest = max_tree_length(self.max_depth, self.max_args)
        if self.min_length + 1 > longest:
            raise ValueError(f"listops: trees of depth <= {self.max_depth} with <= {self.max_args} arguments have "
                             f"at most {longest} tokens, so none is longer than min_length={self.min_length}; "
                             f"raise max_depth / max_args or lower min_length")
        lo, hi = self.min_length + 1, self.max_length - 1  # the lengths allowed, inclusive
        if not (lo <= 1 <= hi or (self.max_depth > 1 and max(lo, 4) <= min(hi, longest))):
            raise ValueError(f"listops: no tree has a length strictly between {self.min_length} and "
                             f"{self.max_length} (a tree has 1 token or at least 4)")

    @property
    def total(self) -> int:
        return self.n_train + self.n_val + self.n_test


def max_tree_length(max_depth: int, max_args: int) -> int:
    """The most tokens a tree can have: a full tree of ``max_args`` arguments down to ``max_depth``."""
    length = 1  # a digit at max_depth
    for _ in range(max_depth - 1):
        length = 2 + max_args * length
        if length > 10**12:
            break
    return length


def _median(values: list[int]) -> int:
    """LRA's ``int(np.median(values))``: the middle value, or the mean of the two middle ones, truncated."""
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2


def _apply(op: str, values: list[int]) -> int:
    if op == "[MIN":
        return min(values)
    if op == "[MAX":
        return max(values)
    if op == "[MED":
        return _median(values)
    return sum(values) % 10  # [SM


class _TooLong(Exception):
    """A tree reached max_length tokens: it will be rejected, so stop drawing it."""


def _tree(rand, depth: int, max_depth: int, max_args: int, limit: int, out: list[str]) -> int:
    """Append one tree's tokens to ``out`` and return its value; ``rand`` is ``Random.random``.

    The draws follow LRA's order (node kind, argument count, arguments, then the operator), each
    made from one uniform number. Raises _TooLong as soon as the tree reaches ``limit`` tokens:
    abandoning a tree that would be rejected anyway leaves the distribution of the kept ones unchanged."""
    if len(out) >= limit:
        raise _TooLong
    if (rand() if depth < max_depth else 1.0) > VALUE_P:
        value = int(rand() * 10)
        out.append(_DIGITS[value])
        return value
    n_args = 2 + int(rand() * (max_args - 1))  # uniform in 2 .. max_args
    start = len(out)
    out.append("")  # the operator, drawn after its arguments as in LRA
    values = [_tree(rand, depth + 1, max_depth, max_args, limit, out) for _ in range(n_args)]
    op = OPERATORS[int(rand() * 4)]
    out[start] = op
    out.append(END)
    return _apply(op, values)


def generate_listops(cfg: ListOpsConfig) -> dict[str, list[tuple[str, int]]]:
    """{"train", "val", "test"}: lists of (expression, value), distinct expressions, seeded.

    Raises ValueError when the length window is so narrow that trees in it are too rare to find.
    """
    check_memory(cfg.total * (2 * cfg.max_length + 200), f"listops: generating {cfg.total:,} expressions of up to "
                 f"{cfg.max_length:,} tokens")
    rng = random.Random(cfg.seed)
    seen: set[str] = set()
    rows: list[tuple[str, int]] = []
    misses = 0
    while len(rows) < cfg.total:
        misses += 1
        if misses > _MAX_ATTEMPTS:
            raise ValueError(f"listops: {_MAX_ATTEMPTS:,} trees in a row gave no new example with "
                             f"{cfg.min_length} < length < {cfg.max_length} ({len(rows):,} of {cfg.total:,} found); "
                             f"widen the length range, raise max_depth / max_args, or ask for fewer examples")
        tokens: list[str] = []
        try:
            value = _tree(rng.random, 1, cfg.max_depth, cfg.max_args, cfg.max_length, tokens)
        except _TooLong:
            continue
        if cfg.min_length < len(tokens) < cfg.max_length:
            text = " ".join(tokens)
            if text not in seen:
                seen.add(text)
                rows.append((text, value))
                misses = 0
    a, b = cfg.n_train, cfg.n_train + cfg.n_val
    return {"train": rows[:a], "val": rows[a:b], "test": rows[b:]}


def write_listops(splits: dict[str, list[tuple[str, int]]], out_dir: str | os.PathLike) -> list[Path]:
    """Write ``basic_{train,val,test}.tsv`` (header ``Source<TAB>Target``) into ``out_dir``, each atomically."""

    def tsv(rows: list[tuple[str, int]]):
        def write(f):
            w = csv.writer(f, delimiter="\t", lineterminator="\n")
            w.writerow(["Source", "Target"])
            w.writerows(rows)
        return write

    return [write_atomic(Path(out_dir) / name, tsv(splits[split]), text=True) for split, name in SPLIT_FILES.items()]


def _tokens(source: str) -> Iterator[str]:
    """Whitespace tokens without LRA's parentheses."""
    return (t for t in source.split() if t not in ("(", ")"))


def evaluate_listops(source: str) -> int:
    """The value of an expression (flat or LRA's parenthesised form). ValueError if malformed."""
    stack: list[tuple[str, list[int]]] = []
    result = None
    for tok in _tokens(source):
        if result is not None:
            raise ValueError(f"listops: tokens after the end of the expression: {tok!r}")
        if tok in OPERATORS:
            stack.append((tok, []))
        elif tok == END:
            if not stack or len(stack[-1][1]) < 1:
                raise ValueError("listops: ']' without an open operator and its arguments")
            op, vals = stack.pop()
            value = _apply(op, vals)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        elif len(tok) == 1 and tok.isdigit():
            if not stack:
                if result is not None:
                    raise ValueError("listops: more than one expression")
                result = int(tok)
            else:
                stack[-1][1].append(int(tok))
        else:
            raise ValueError(f"listops: unknown token {tok!r}")
    if stack or result is None:
        raise ValueError("listops: unbalanced expression (an operator is never closed)")
    return result


def read_listops(path: str | os.PathLike, *, limit: int | None = None, check: bool = True
                 ) -> list[tuple[list[int], int]]:
    """A ListOps TSV (``Source<TAB>Target`` header) -> [(token ids in ``VOCAB``, label)].

    With ``check`` the label is compared with the expression's value. Errors name file and line.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"listops: {path} does not exist; create it with `attnkit lra generate listops`")
    ids = {t: i for i, t in enumerate(VOCAB)}
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if lineno == 1:
                if line.split("\t") != ["Source", "Target"]:
                    raise ValueError(f"{path}:1: expected the header 'Source<TAB>Target', got {line[:60]!r}")
                continue
            if not line:
                continue
            cols = line.split("\t")
            if len(cols) != 2:
                raise ValueError(f"{path}:{lineno}: expected 2 tab-separated fields, got {len(cols)}")
            source, target = cols
            if not target.strip().isdigit() or not 0 <= int(target) <= 9:
                raise ValueError(f"{path}:{lineno}: Target must be a digit 0-9, got {target!r}")
            toks = list(_tokens(source))
            bad = next((t for t in toks if t not in ids or t == VOCAB[0]), None)
            if bad is not None:
                raise ValueError(f"{path}:{lineno}: unknown token {bad!r}")
            if check:
                try:
                    value = evaluate_listops(source)
                except ValueError as e:
                    raise ValueError(f"{path}:{lineno}: {e}") from None
                if value != int(target):
                    raise ValueError(f"{path}:{lineno}: Target {target} but the expression evaluates to {value}")
            out.append(([ids[t] for t in toks], int(target)))
            if limit is not None and len(out) >= limit:
                break
    return out
