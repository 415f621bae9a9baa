"""``attnkit lecture``: the lecture's own example, matrix by matrix.

Four input vectors a1..a4 form I (one column each, as in the lecture). Q = W^q I, K = W^k I,
V = W^v I; A = K^T Q; A' = softmax over each column of A; O = V A'. Then two heads with W^o.
The two-head example is also written as the lecture page (lecture.html: the chain for any head and
input vector, with these numbers), next to heatmaps of A'.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from ..functional import explain
from ..nn.limits import SEED


def _show(name: str, t: torch.Tensor, note: str = "") -> None:
    print(f"{name} {tuple(t.shape)}{'  ' + note if note else ''}")
    for row in t.tolist():
        print("   " + " ".join(f"{x:7.3f}" for x in row))


def _page(I: torch.Tensor, weights: list, Wo: torch.Tensor, path: Path) -> Path:
    """The two-head example as the lecture page: a1..a4 as tokens, one layer of two heads."""
    from ..viz.heads import LayerParts
    from ..viz.lecture import lecture_html

    q, k, v = (torch.stack([w[i] @ I for w in weights]).mT for i in range(3))  # (H, d_k, 4) -> (H, 4, d_k)
    parts = LayerParts(q, k, v, Wo, None, None)
    return lecture_html([parts], ["a1", "a2", "a3", "a4"], path, layer_names=["the example"],
                        title="attnkit lecture: two heads, step by step",
                        notes="The lecture's small example (attnkit lecture): four input vectors a1..a4, "
                              "two heads with their own W^q, W^k, W^v, and W^o merging them.")


def run(out_dir: Path, seed: int = 0, d_in: int = 4, d_k: int = 3) -> dict:
    g = torch.Generator().manual_seed(seed)
    I = torch.randn(d_in, 4, generator=g)  # noqa: E741  columns a1..a4
    Wq, Wk, Wv = (torch.randn(d_k, d_in, generator=g) for _ in range(3))
    print("Self-attention, the lecture's way (one column per input vector)\n")
    _show("I = [a1 a2 a3 a4]", I)
    Q, K, V = Wq @ I, Wk @ I, Wv @ I
    _show("Q = W^q I", Q)
    _show("K = W^k I", K)
    _show("V = W^v I", V)
    A = K.T @ Q
    _show("A = K^T Q", A, "(column i: query q^i against every key)")
    # the library computes the same thing batch-first: rows = queries, so A here is A^T.
    ex = explain(Q.T, K.T, V.T, score="dot")
    A_prime = ex.weights.T
    _show("A' = softmax(A) per column", A_prime, "(each column sums to 1)")
    O = V @ A_prime
    _show("O = V A'", O, "(column i is b^i)")
    assert torch.allclose(A, ex.scores.T, atol=1e-5) and torch.allclose(O, ex.out.T, atol=1e-5)

    print("\nMulti-head: two heads, each with its own W^{q,i}, W^{k,i}, W^{v,i}; W^o merges them\n")
    heads, weights = [], []
    for h in range(2):
        Wqh, Wkh, Wvh = (torch.randn(d_k, d_in, generator=g) for _ in range(3))
        e = explain((Wqh @ I).T, (Wkh @ I).T, (Wvh @ I).T, score="scaled_dot")
        heads.append(e)
        weights.append((Wqh, Wkh, Wvh))
        _show(f"head {h + 1}: A'", e.weights.T)
    Wo = torch.randn(d_in, 2 * d_k, generator=g)
    B = Wo @ torch.cat([e.out.T for e in heads], dim=0)  # (d_in, 2 d_k) @ (2 d_k, 4)
    _show("O = W^o [O^1; O^2]", B)

    paths = {"page": _page(I, weights, Wo, out_dir / "lecture.html")}
    try:
        from ..viz import attention_heatmap
    except ImportError:
        print(f"\nwrote {paths['page']} (the chain for any head and input, in a browser)")
        print("(matplotlib is not installed: no heatmap written; pip install 'attnkit[viz]')")
        return paths
    names = ["a1", "a2", "a3", "a4"]
    paths["single"] = attention_heatmap(ex.weights, out_dir / "lecture_attention.png", queries=names, keys=names,
                                        title="A' (rows: queries, columns: keys)")
    for h, e in enumerate(heads):
        paths[f"head{h + 1}"] = attention_heatmap(e.weights, out_dir / f"lecture_head{h + 1}.png",
                                                  queries=names, keys=names, title=f"head {h + 1}: A'")
    for k, p in paths.items():
        print(f"wrote {p} ({'the chain for any head and input, in a browser' if k == 'page' else k})")
    return paths


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lecture", help="walk the lecture's example: I -> Q, K, V -> A -> A' -> O, then two heads")
    p.add_argument("--out", type=Path, default=Path("runs/lecture"),
                   help="folder for lecture.html and the heatmaps (default runs/lecture)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the example's matrices")
    p.set_defaults(func=lambda a: run(a.out, a.seed))
