"""Planetoid citation graphs (Cora, CiteSeer, PubMed) with the public split of the GCN/GAT papers.

The files are the raw ``ind.{name}.{x,y,tx,ty,allx,ally,graph,test.index}`` of
kimiyoung/planetoid. All but ``test.index`` are Python 2 pickles; they are read with a restricted
unpickler that admits only the numpy/scipy/collections types these files hold, so a tampered file
cannot run code. The split is Kipf & Welling's (and PyG's): train = the 20 labelled nodes per class
(``range(len(y))``), val = the next 500 nodes, test = the ids in ``test.index``. CiteSeer has 15
test ids with no features (isolated nodes); they get zero features and label 0 and are in no split.

Directory lookup: ``<root>/planetoid`` or ``root`` itself (a folder holding the ``ind.*`` files), where
``root`` defaults to the datasets root (``attnkit.data.download.data_root``); then the download cache.
``download=True`` fetches missing files from GitHub into the cache with a sha256 check.
"""

from __future__ import annotations

import collections
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor

from .download import cache_dir, data_root, fetch, missing_data

__all__ = ["PlanetoidGraph", "load_planetoid", "RestrictedUnpickler", "ForbiddenGlobal", "load_pickle", "NAMES",
           "SOURCE_URL"]

NAMES = ("cora", "citeseer", "pubmed")
PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
SOURCE_URL = "https://github.com/kimiyoung/planetoid/raw/af6abf468a772cc055bec88c52e4d6f51b7c37e3/data"

SHA256 = {
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "ind.pubmed.x": "fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33",
    "ind.pubmed.y": "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",
    "ind.pubmed.tx": "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",
    "ind.pubmed.ty": "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",
    "ind.pubmed.allx": "508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e",
    "ind.pubmed.ally": "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",
    "ind.pubmed.graph": "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",
    "ind.pubmed.test.index": "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",
}


class ForbiddenGlobal(pickle.UnpicklingError):
    """A Planetoid pickle referred to a global outside the allow-list."""


def _latin1_encode(text: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """What Python 3's protocol-2 pickles of bytes call (``_codecs.encode(s, "latin1")``); only latin-1."""
    if encoding not in ("latin1", "latin-1"):
        raise ForbiddenGlobal(f"_codecs.encode with encoding {encoding!r} is not allowed")
    return text.encode("latin-1", errors)


def _allowed() -> dict[tuple[str, str], object]:
    import scipy.sparse as sp

    try:  # numpy >= 2 keeps it in numpy._core; numpy.core is a deprecated alias
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import _reconstruct
    return {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
        ("scipy.sparse.csr", "csr_matrix"): sp.csr_matrix,
        ("scipy.sparse._csr", "csr_matrix"): sp.csr_matrix,
        ("collections", "defaultdict"): collections.defaultdict,
        ("_codecs", "encode"): _latin1_encode,  # numpy arrays pickled by Python 3 with protocol 2
        ("__builtin__", "list"): list,
        ("builtins", "list"): list,
    }


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals Planetoid files use; anything else is refused."""

    def find_class(self, module: str, name: str):
        obj = _allowed().get((module, name))
        if obj is None:
            raise ForbiddenGlobal(f"global '{module}.{name}' is not allowed in a Planetoid file")
        return obj


def load_pickle(path: str | os.PathLike):
    """Unpickle one Planetoid file safely. Raises ValueError naming the file if it does not parse
    or refers to anything but ndarray / dtype / csr_matrix / defaultdict / list (and latin-1 bytes)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, encoding="latin1").load()
    except FileNotFoundError:
        raise
    except ForbiddenGlobal as e:
        raise ValueError(f"planetoid: refused to load {path}: {e}") from e
    except Exception as e:  # corrupt pickles raise UnpicklingError, EOFError, KeyError, TypeError, ...
        raise ValueError(f"planetoid: {path} does not parse as a Planetoid pickle "
                         f"({type(e).__name__}: {e})") from e


def _read_index(path: Path) -> np.ndarray:
    ids = []
    with open(path, encoding="ascii", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            s = line.strip()
            if not s:
                continue
            if not s.isdigit():
                raise ValueError(f"planetoid: {path} line {lineno}: expected a node id, got {s[:40]!r}")
            ids.append(int(s))
    return np.asarray(ids, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class PlanetoidGraph:
    """One citation graph. ``edge_index`` (2, E) holds both directions, no self-loops, no duplicates."""

    name: str
    x: Tensor  # (N, F) float32 (row-normalised when loaded with normalize_features=True)
    y: Tensor  # (N,) int64 class ids
    edge_index: Tensor  # (2, E) int64, (source, target)
    train_idx: Tensor  # (n_train,) int64
    val_idx: Tensor  # (500,) (fewer only for graphs with under 500 unlabelled training rows)
    test_idx: Tensor  # (1000,)
    num_classes: int

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    @property
    def num_features(self) -> int:
        return self.x.shape[1]

    @property
    def num_edges(self) -> int:
        return self.edge_index.shape[1]


def _locate(name: str, root: str | os.PathLike | None, download: bool) -> Path:
    cache = cache_dir("planetoid")
    folders = [data_root(root) / "planetoid"] + ([Path(root)] if root is not None else []) + [cache]
    for folder in folders:
        if all((folder / f"ind.{name}.{p}").exists() for p in PARTS):
            return folder
    base = next((f for f in folders if f.is_dir() and any(f.glob(f"ind.{name}.*"))), folders[0])
    missing = [p for p in PARTS if not (base / f"ind.{name}.{p}").exists()]
    if download:  # the whole set into the cache (files already there with the right sha256 are kept)
        for p in PARTS:
            fn = f"ind.{name}.{p}"
            fetch(f"{SOURCE_URL}/{fn}", cache / fn, SHA256[fn])
        return cache
    raise missing_data(f"planetoid {name}", ", ".join(f"ind.{name}.{p}" for p in missing), base, "planetoid")


def _as_dense(m, path: Path) -> np.ndarray:
    if hasattr(m, "toarray"):
        return np.asarray(m.toarray(), dtype=np.float32)
    if isinstance(m, np.ndarray) and m.ndim == 2:
        return m.astype(np.float32)
    raise ValueError(f"planetoid: {path} should hold a 2-D matrix, got {type(m).__name__}")


def _edges_from_dict(graph, num_nodes: int, path: Path) -> Tensor:
    if not isinstance(graph, dict):
        raise ValueError(f"planetoid: {path} should hold a dict of adjacency lists, got {type(graph).__name__}")
    src, dst = [], []
    for node, nbrs in graph.items():
        for m in nbrs:
            src.append(int(node))
            dst.append(int(m))
    import torch  # here, not at the top: `attnkit train graph --help` reads NAMES without torch

    ei = torch.tensor([src + dst, dst + src], dtype=torch.long)  # both directions: (2, 2E')
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= num_nodes):
        raise ValueError(f"planetoid: {path} has node ids outside [0, {num_nodes})")
    ei = ei[:, ei[0] != ei[1]]  # drop self-loops (models add their own)
    key = torch.unique(ei[1] * num_nodes + ei[0])  # sorted by target, then source; duplicates removed
    return torch.stack([key % num_nodes, key // num_nodes])  # (2, E)


def load_planetoid(name: str, root: str | os.PathLike | None = None, *, normalize_features: bool = True,
                   download: bool = False) -> PlanetoidGraph:
    """Load ``name`` in {"cora", "citeseer", "pubmed"} with the public (GCN/GAT) split."""
    import torch

    name = name.lower()
    if name not in NAMES:
        raise ValueError(f"planetoid: `name` must be one of {NAMES}, got {name!r}")
    base = _locate(name, root, download)
    f = {p: base / f"ind.{name}.{p}" for p in PARTS}
    obj = {p: load_pickle(f[p]) for p in ("x", "y", "tx", "ty", "allx", "ally", "graph")}
    allx, tx = _as_dense(obj["allx"], f["allx"]), _as_dense(obj["tx"], f["tx"])
    ally, ty = np.asarray(obj["ally"]), np.asarray(obj["ty"])
    n_train = int(np.asarray(obj["y"]).shape[0])
    test_idx = _read_index(f["test.index"])
    if tx.shape[0] != test_idx.shape[0] or ty.shape[0] != tx.shape[0]:
        raise ValueError(f"planetoid: {f['test.index']} lists {test_idx.shape[0]} ids but {f['tx']} has "
                         f"{tx.shape[0]} rows and {f['ty']} {ty.shape[0]}")
    if allx.shape[0] != ally.shape[0] or allx.shape[1] != tx.shape[1]:
        raise ValueError(f"planetoid: shapes disagree: allx {allx.shape}, ally {ally.shape}, tx {tx.shape}")
    order = np.sort(test_idx)
    lo = allx.shape[0]
    if test_idx.size == 0 or int(order[0]) < lo or np.unique(test_idx).size != test_idx.size:
        raise ValueError(f"planetoid: {f['test.index']} must list distinct ids >= {lo} (the rows of allx)")
    n_test_rows = int(order.max()) - lo + 1  # CiteSeer: ids with no row (isolated) are padded with zeros
    tx_full = np.zeros((n_test_rows, tx.shape[1]), np.float32)
    ty_full = np.zeros((n_test_rows, ty.shape[1]), ty.dtype)
    # Row r of tx/ty belongs to node test_idx[r]: place it there directly.
    tx_full[test_idx - lo], ty_full[test_idx - lo] = tx, ty
    x = np.concatenate([allx, tx_full])  # (N, F)
    labels = np.concatenate([ally, ty_full]).argmax(1)  # (N,)
    if normalize_features:
        s = x.sum(1, keepdims=True)
        x = np.divide(x, s, out=np.zeros_like(x), where=s != 0)
    n = x.shape[0]
    edge_index = _edges_from_dict(obj["graph"], n, f["graph"])
    return PlanetoidGraph(
        name=name, x=torch.from_numpy(x), y=torch.from_numpy(labels).long(), edge_index=edge_index,
        train_idx=torch.arange(n_train), val_idx=torch.arange(n_train, min(n_train + 500, lo)),
        test_idx=torch.from_numpy(order), num_classes=int(ally.shape[1]))
