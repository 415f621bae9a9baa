"""Task glue for ``attnkit train graph``: Planetoid node classification with graph attention (GAT).

The whole graph is one example: an "epoch" is one full-batch step. The targets are the labels of
the split's nodes (train / val / test of the public split); every other node is ``IGNORE``.
Four encoder options map onto the GAT (the others are not offered): ``--num-heads`` heads of
``--d-model / --num-heads`` hidden units, ``--dropout`` on inputs, ``--attention-dropout`` on the edge
weights. The GAT paper's weight decay is an L2 term in the gradient (``--l2``, like
``torch.optim.Adam(weight_decay=...)``); the engine's decoupled ``--weight-decay`` defaults to 0 here.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import torch

from ..data.planetoid import PlanetoidGraph, load_planetoid
from ..models.graph import GAT, GraphAttentionConfig, add_self_loops, link_pairs
from ..nn import TransformerConfig
from ..train import Task
from ..train.from_meta import model_from_meta
from ..train.metrics import IGNORE
from .options.graph import NAME

SPLITS = ("train", "dev", "test")


def _features(g: PlanetoidGraph, dense: bool) -> torch.Tensor:
    if dense:
        return g.x
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return g.x.to_sparse_csr()


def _targets(g: PlanetoidGraph, split: str) -> torch.Tensor:
    idx = {"train": g.train_idx, "dev": g.val_idx, "test": g.test_idx}[split]
    t = torch.full((g.num_nodes,), IGNORE, dtype=torch.long)
    t[idx] = g.y[idx]
    return t


def make_forward(g: PlanetoidGraph, dense: bool = False, link_loss: float = 0.0, link_negatives: float = 1.0):
    """forward(model, split) -> (logits (N, C), targets (N,) with IGNORE outside the split); in training
    with ``link_loss`` > 0, also ``link_loss`` x the edge loss on the real edges and fresh random pairs."""
    x, ei = _features(g, dense), add_self_loops(g.edge_index, g.num_nodes)
    targets = {s: _targets(g, s) for s in SPLITS}

    def forward(model, split):
        if link_loss > 0 and model.training:
            logits, link = model(x, ei, link_pairs=link_pairs(g.edge_index, g.num_nodes, link_negatives))
            return logits, targets[split], link_loss * link
        return model(x, ei), targets[split]

    return forward


def collate(examples: list[str]) -> str:
    if len(examples) != 1:
        raise ValueError(f"graph: one graph per batch, got {len(examples)} examples; use --batch-size 1")
    return examples[0]


def add_l2(model: torch.nn.Module, l2: float) -> None:
    """grad += l2 * w for every parameter (coupled L2, as the GAT paper's Adam with weight decay)."""
    if l2 > 0:
        for p in model.parameters():
            p.register_hook(lambda grad, p=p: grad + l2 * p.detach())


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    g = load_planetoid(args.dataset, args.data_dir, download=args.download)
    pubmed = args.dataset == "pubmed"
    out_heads = args.out_heads or (8 if pubmed else 1)
    l2 = args.l2 if args.l2 is not None else (1e-3 if pubmed else 5e-4)
    cfg = GraphAttentionConfig(g.num_features, g.num_classes, hidden=encoder.head_dim, heads=encoder.num_heads,
                               out_heads=out_heads, score=args.score, dropout=encoder.dropout,
                               attention_dropout=encoder.attention_dropout, value_dropout=args.value_dropout,
                               qk_source=args.qk_source, link_loss=args.link_loss,
                               link_negatives=args.link_negatives)
    torch.manual_seed(seed)
    model = GAT(cfg)
    add_l2(model, l2)
    meta = {"model": cfg.to_dict(), "dataset": args.dataset, "l2": l2, "dense_features": args.dense_features,
            "labels": [str(i) for i in range(g.num_classes)]}
    forward = make_forward(g, args.dense_features, cfg.link_loss, cfg.link_negatives)
    return Task(NAME, model, ["train"], collate, forward, dev=["dev"], test=["test"], meta=meta)


def load(folder: Path, meta: dict) -> GAT:
    model = model_from_meta(folder, meta, lambda: GAT(GraphAttentionConfig(**meta["model"])))
    return model.eval()


def _graph(meta: dict, args=None) -> PlanetoidGraph:
    return load_planetoid(meta["dataset"], getattr(args, "data_dir", None), download=getattr(args, "download", False))


def task_for(model, meta: dict, args=None) -> Task:
    return Task(NAME, model, ["train"], collate, make_forward(_graph(meta, args), meta.get("dense_features", False)),
                meta=meta)


def evaluation_data(meta: dict, path: str | None, args=None):
    """``--data train|dev|test`` (default test): that split of the checkpoint's graph."""
    split = path or "test"
    if split not in SPLITS:
        raise ValueError(f"graph: --data must be one of {SPLITS}, got {path!r}")
    return [split]


MAX_NEIGHBOURS = 60  # a node's picture shows at most this many neighbours (those it weighs most)


@torch.no_grad()
def node_attention(model: GAT, x: torch.Tensor, edge_index: torch.Tensor, nodes: list[int]) -> dict:
    """For each node of ``nodes``: (its neighbours (K,) = the sources of its in-edges, itself included, and per
    layer the attention weights (H, K) it gives them), from the layers' public calls, as ``GAT`` runs them in
    eval mode. The last layer's output is returned too (``"logits"``), equal to ``model(x, edge_index)``."""
    found = {i: (edge_index[0, edge_index[1] == i], []) for i in nodes}
    h = x
    for n, layer in enumerate((model.layer1, model.layer2)):
        out, weights = layer(h, edge_index, need_weights=True)  # additive: (E, H), softmaxed per target
        for i, (_, per_layer) in found.items():
            into = edge_index[1] == i
            if weights is not None:
                per_layer.append(weights[into].T)  # (K, H) -> (H, K)
            else:  # dot: softmax over the node's in-edges of q_i . k_j / sqrt(C)
                per_layer.append(layer.link_logits(h, edge_index[:, into]).softmax(0).T)
        h = torch.nn.functional.elu(out) if n == 0 else out
    return {"logits": h, **found}


def _draw(g: PlanetoidGraph, i: int, p: torch.Tensor, src: torch.Tensor, per_layer: list, meta: dict,
          out_dir: Path) -> Path:
    """Node ``i``'s attention over its neighbours, every head of both layers (``viz.graph_attention``)."""
    from ..viz.graph_attention import node_attention_png

    shown = per_layer[0].mean(0).argsort(descending=True)[:MAX_NEIGHBOURS]  # the neighbours layer 1 weighs most
    names = [("itself" if int(j) == i else f"node {int(j)}") + f" (class {int(g.y[j])})" for j in src[shown]]
    cut = f", the {len(shown)} it weighs most of {len(src)}" if len(shown) < len(src) else ""
    layers = [(f"layer {n + 1}: {w.shape[0]} head{'s' if w.shape[0] > 1 else ''}", w[:, shown])
              for n, w in enumerate(per_layer)]
    title = (f"{meta['dataset']}: node {i} (class {int(g.y[i])}, predicted {int(p.argmax())}) attends to its "
             f"neighbours{cut}")
    return node_attention_png(names, layers, Path(out_dir) / f"attention_node{i}.png", title=title)


@torch.no_grad()
def predict(model: GAT, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    """Inputs are node ids of the checkpoint's graph; prints the predicted and the true class. With ``out_dir``:
    each node's attention over its neighbours, every head of both layers (attention_node<ID>.png)."""
    g = _graph(meta, args)
    for spec in inputs:
        if not spec.isdigit() or int(spec) >= g.num_nodes:
            raise ValueError(f"graph: predict takes node ids in [0, {g.num_nodes}), got {spec!r}")
    nodes = [int(spec) for spec in inputs]
    x, ei = _features(g, meta.get("dense_features", False)), add_self_loops(g.edge_index, g.num_nodes)
    found = node_attention(model, x, ei, nodes) if out_dir is not None else {"logits": model(x, ei)}
    lines = []
    for i in nodes:
        p = found["logits"][i].softmax(-1)
        lines.append(f"node {i}: class {int(p.argmax())} (p={float(p.max()):.3f}), true class {int(g.y[i])}")
        if out_dir is not None:
            lines.append(f"wrote {_draw(g, i, p, *found[i], meta, out_dir)}")
    return lines
