"""ListOps generated with LRA's recipe: labels are exactly the expressions' values, files in LRA's layout."""

import ast
import csv
import random
import statistics

import pytest

from attnkit.data.listops import (
    END,
    OPERATORS,
    VOCAB,
    ListOpsConfig,
    evaluate_listops,
    generate_listops,
    max_tree_length,
    read_listops,
    write_listops,
)


def _independent_value(source: str) -> int:
    """A second evaluator: rewrite the expression as a Python literal of nested lists and reduce it."""
    py = source.replace("]", "],")
    for op in OPERATORS:
        py = py.replace(op + " ", f"['{op}', ")
    tree = ast.literal_eval(" ".join(t + ("," if t.isdigit() else "") for t in py.split()).rstrip(","))

    def value(node):
        if isinstance(node, int):
            return node
        op, *args = node
        vals = [value(a) for a in args]
        return {"[MIN": min, "[MAX": max, "[SM": lambda v: sum(v) % 10,
                "[MED": lambda v: int(statistics.median(v))}[op](vals)

    return value(tree)


def test_labels_are_the_values_and_lengths_in_range():
    cfg = ListOpsConfig(min_length=20, max_length=120, n_train=150, n_val=20, n_test=20, seed=3)
    splits = generate_listops(cfg)
    rows = [r for s in splits.values() for r in s]
    assert [len(s) for s in splits.values()] == [150, 20, 20]
    assert len({src for src, _ in rows}) == len(rows)  # distinct
    for src, label in rows:
        assert 20 < len(src.split()) < 120
        assert label == evaluate_listops(src) == _independent_value(src)
        assert src.startswith("[") and src.endswith(END)
    assert {src.split()[0] for src, _ in rows} == set(OPERATORS)


def test_seeded_and_lra_distribution():
    cfg = ListOpsConfig(min_length=10, max_length=300, n_train=300, n_val=1, n_test=1, seed=1)
    assert generate_listops(cfg) == generate_listops(cfg)
    assert generate_listops(cfg) != generate_listops(ListOpsConfig(**{**cfg.__dict__, "seed": 2}))
    labels = [y for _, y in generate_listops(cfg)["train"]]
    assert len(set(labels)) == 10


def test_median_truncates_like_numpy():
    assert evaluate_listops("[MED 1 2 ]") == 1  # median 1.5 -> int() = 1
    assert evaluate_listops("[MED 9 8 1 0 ]") == 4  # (1 + 8) / 2 = 4.5 -> 4
    assert evaluate_listops("[SM 9 8 [MAX 1 7 ] ]") == 4
    assert evaluate_listops("( ( ( [MIN 4 ) 3 ) ] )") == 3  # LRA's own parenthesised form of [MIN 4 3 ]


def test_files_in_lra_layout(tmp_path):
    cfg = ListOpsConfig(min_length=5, max_length=60, n_train=30, n_val=5, n_test=7, seed=0)
    splits = generate_listops(cfg)
    paths = write_listops(splits, tmp_path)
    assert [p.name for p in paths] == ["basic_train.tsv", "basic_val.tsv", "basic_test.tsv"]
    with open(paths[2], newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["Source", "Target"] and len(rows) == 8
    back = read_listops(paths[0])
    assert [y for _, y in back] == [y for _, y in splits["train"]]
    assert [" ".join(VOCAB[i] for i in ids) for ids, _ in back] == [s for s, _ in splits["train"]]


def test_bad_files_name_file_and_line(tmp_path):
    p = tmp_path / "basic_train.tsv"
    p.write_text("Source\tTarget\n[MAX 1 2 ]\t2\n[MAX 1 2 ]\t5\n")
    with pytest.raises(ValueError, match=r"basic_train.tsv:3: Target 5 but the expression evaluates to 2"):
        read_listops(p)
    p.write_text("Source\tTarget\n[FOO 1 ]\t1\n")
    with pytest.raises(ValueError, match=r":2: unknown token '\[FOO'"):
        read_listops(p)
    p.write_text("x\ty\n")
    with pytest.raises(ValueError, match=":1: expected the header"):
        read_listops(p)


@pytest.mark.parametrize("kw, message", [
    ({"min_length": 500, "max_length": 501}, "strictly between"),
    ({"max_depth": 2, "max_args": 10, "min_length": 500}, "at most 12 tokens"),
    ({"max_args": 1}, "max_args"),
    ({"n_train": 0}, "n_train"),
    ({"min_length": 1, "max_length": 4}, "no tree has a length"),
])
def test_impossible_settings_rejected(kw, message):
    with pytest.raises(ValueError, match=message):
        ListOpsConfig(**kw)


def test_rare_window_gives_up_with_a_clear_message(monkeypatch):
    from attnkit.data import listops

    monkeypatch.setattr(listops, "_MAX_ATTEMPTS", 2000)
    cfg = ListOpsConfig(max_depth=3, max_args=3, min_length=13, max_length=15, n_train=5, n_val=1, n_test=1)
    assert max_tree_length(3, 3) == 17
    with pytest.raises(ValueError, match="in a row gave no new example"):
        generate_listops(cfg)


def test_draws_follow_lra_order():
    """The first tree of a seed: node kind, argument count, arguments, then the operator."""
    rng = random.Random(0)
    first = rng.random()
    assert first > 0.25  # seed 0's first draw makes a digit: a one-token tree
    out = []
    from attnkit.data.listops import _tree

    assert _tree(random.Random(0).random, 1, 10, 10, 100, out) == int(rng.random() * 10) and len(out) == 1
