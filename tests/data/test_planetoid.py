"""Planetoid loader on a tiny generated file set, the restricted unpickler, and the real files if present."""

from __future__ import annotations

import collections
import hashlib
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from attnkit.data.download import data_root, fetch
from attnkit.data.planetoid import load_pickle, load_planetoid

F_DIM, C = 4, 3


def _dump(path: Path, obj) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def write_tiny(root: Path, name: str = "cora", missing_test_id: bool = False) -> dict:
    """3 labelled nodes (0-2), 3 more training rows (3-5), test nodes 6-9 listed out of order.

    Node i has feature row i (a distinct pattern) and label i % 3. With ``missing_test_id``, node 8
    has no row (CiteSeer's isolated test nodes)."""
    feats = np.eye(10, F_DIM, dtype=np.float32) * 2 + np.arange(10, dtype=np.float32)[:, None] % 2  # (10, F)
    labels = np.eye(C, dtype=np.float64)[np.arange(10) % 3]  # (10, C) one-hot
    test_ids = [9, 6, 7] if missing_test_id else [9, 6, 8, 7]
    graph = collections.defaultdict(list, {0: [1, 6], 1: [0, 2], 2: [1], 3: [4, 3], 4: [3], 5: [9], 6: [0],
                                           7: [8] if not missing_test_id else [], 9: [5]})
    parts = {
        "x": sp.csr_matrix(feats[:3]), "y": labels[:3],
        "allx": sp.csr_matrix(feats[:6]), "ally": labels[:6],
        "tx": sp.csr_matrix(feats[test_ids]), "ty": labels[test_ids], "graph": graph,
    }
    for k, v in parts.items():
        _dump(root / f"ind.{name}.{k}", v)
    (root / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_ids))
    return {"feats": feats, "labels": labels.argmax(1), "test_ids": test_ids}


def test_tiny_split_features_and_edges(tmp_path):
    ref = write_tiny(tmp_path)
    g = load_planetoid("cora", tmp_path, normalize_features=False)
    assert g.num_nodes == 10 and g.num_features == F_DIM and g.num_classes == C
    torch.testing.assert_close(g.x, torch.from_numpy(ref["feats"]))  # every node got its own row back
    assert g.y.tolist() == ref["labels"].tolist()
    assert g.train_idx.tolist() == [0, 1, 2]
    assert g.val_idx.tolist() == [3, 4, 5]  # range(len(y), len(y) + 500), clipped to the non-test rows
    assert g.test_idx.tolist() == [6, 7, 8, 9]  # sorted test.index
    pairs = set(map(tuple, g.edge_index.T.tolist()))
    assert (3, 3) not in pairs  # self-loop dropped
    assert all((t, s) in pairs for s, t in pairs)  # both directions
    assert len(pairs) == g.num_edges  # no duplicates ((0,1) is listed from both ends)
    assert pairs == {(0, 1), (1, 0), (0, 6), (6, 0), (1, 2), (2, 1), (3, 4), (4, 3), (5, 9), (9, 5), (7, 8), (8, 7)}


def test_row_normalised_features(tmp_path):
    ref = write_tiny(tmp_path)
    g = load_planetoid("cora", tmp_path)
    nonzero = torch.from_numpy(ref["feats"].sum(1) > 0).float()  # all-zero rows (4, 6, 8) stay zero
    torch.testing.assert_close(g.x.sum(1), nonzero)


def test_isolated_test_ids_padded_like_kipf(tmp_path):
    ref = write_tiny(tmp_path, "citeseer", missing_test_id=True)
    g = load_planetoid("citeseer", tmp_path, normalize_features=False)
    assert g.num_nodes == 10
    assert g.x[8].abs().sum() == 0 and int(g.y[8]) == 0  # no row for node 8: zeros, label 0
    assert g.test_idx.tolist() == [6, 7, 9]  # and it is in no split
    for i in (6, 7, 9):
        torch.testing.assert_close(g.x[i], torch.from_numpy(ref["feats"][i]))


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


def test_malicious_pickle_is_refused(tmp_path, monkeypatch):
    write_tiny(tmp_path)
    monkeypatch.chdir(tmp_path)
    _dump(tmp_path / "ind.cora.graph", {"0": _Evil()})
    assert b"system" in (tmp_path / "ind.cora.graph").read_bytes()
    with pytest.raises(ValueError, match=r"ind\.cora\.graph.*(posix|os|nt)\.system.* not allowed"):
        load_planetoid("cora", tmp_path)
    assert not (tmp_path / "pwned.txt").exists()
    with pytest.raises(ValueError, match=r"(__builtin__|builtins)\.eval.* not allowed"):
        data = pickle.dumps(eval, protocol=2)  # a reference to a builtin is refused too
        (tmp_path / "evil.pkl").write_bytes(data)
        load_pickle(tmp_path / "evil.pkl")


def test_file_that_does_not_parse_is_named(tmp_path):
    write_tiny(tmp_path)
    (tmp_path / "ind.cora.ty").write_bytes(b"\x80\x02not a pickle at all")
    with pytest.raises(ValueError, match=r"ind\.cora\.ty does not parse"):
        load_planetoid("cora", tmp_path)
    write_tiny(tmp_path)
    (tmp_path / "ind.cora.test.index").write_text("6\nseven\n")
    with pytest.raises(ValueError, match=r"ind\.cora\.test\.index line 2"):
        load_planetoid("cora", tmp_path)


def test_missing_file_and_unknown_name(tmp_path):
    write_tiny(tmp_path, "pubmed")
    (tmp_path / "ind.pubmed.allx").unlink()
    with pytest.raises(FileNotFoundError, match=r"ind\.pubmed\.allx"):
        load_planetoid("pubmed", tmp_path)
    with pytest.raises(ValueError, match="must be one of"):
        load_planetoid("reddit", tmp_path)


def test_fetch_checks_sha256_and_caches(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"planetoid bytes")
    digest = hashlib.sha256(b"planetoid bytes").hexdigest()
    dest = tmp_path / "cache" / "ind.cora.x"
    with pytest.raises(ValueError, match="sha256"):
        fetch(src.as_uri(), dest, "0" * 64)
    assert not dest.exists() and not list(dest.parent.glob("*.part"))
    assert fetch(src.as_uri(), dest, digest).read_bytes() == b"planetoid bytes"
    src.unlink()  # cached: no second download
    assert fetch(src.as_uri(), dest, digest) == dest


REAL = data_root() / "planetoid"


@pytest.mark.skipif(not (REAL / "ind.cora.graph").exists(), reason="shared Planetoid files not present")
@pytest.mark.parametrize("name,nodes,edges,classes,feats,n_train",
                         [("cora", 2708, 10556, 7, 1433, 140), ("citeseer", 3327, 9104, 6, 3703, 120)])
def test_real_public_split(name, nodes, edges, classes, feats, n_train):
    g = load_planetoid(name)
    assert (g.num_nodes, g.num_edges, g.num_classes, g.num_features) == (nodes, edges, classes, feats)
    assert len(g.train_idx) == n_train and len(g.val_idx) == 500 and len(g.test_idx) == 1000
    assert torch.bincount(g.y[g.train_idx]).tolist() == [20] * classes
