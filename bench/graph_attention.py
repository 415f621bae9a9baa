"""Graph attention time per training epoch: attnkit's GAT vs PyTorch Geometric's GATConv, same sizes.

    python bench/graph_attention.py --repeats 20 --accuracy-seeds 3

Rows: Cora (2708 nodes, 13264 edges with self-loops, 1433 bag-of-words features) and a random graph
the size of PubMed (19717 nodes, 88648 random directed edges + self-loops, 500 dense features,
3 classes, 8 output heads as in the GAT paper's PubMed model). One epoch = forward, backward and an
Adam step of the 2-layer model (8 heads x 8 hidden, dropout 0.6 on inputs and attention).
Both models get the same edge list with self-loops (PyG's ``add_self_loops=False``, so neither
re-adds loops per call). attnkit is timed with sparse (CSR) and dense Cora features; PyG with dense
features (its ``Linear`` takes dense input, as in its GAT example). Ratio = PyG time / attnkit time
(> 1: attnkit faster). Medians of ``--repeats`` epochs after warm-up, the two models' epochs
interleaved. ``--accuracy-seeds N`` also trains
both on Cora with the GAT paper's loop (bench/graph_accuracy.py) and prints mean test accuracy.
Needs the ``bench`` extra (torch_geometric).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnkit.data.planetoid import load_planetoid  # noqa: E402
from attnkit.models.graph import GAT, GraphAttentionConfig, add_self_loops  # noqa: E402


class PygGAT(nn.Module):
    """The GAT of PyG's example, from ``torch_geometric.nn.GATConv``, with the same sizes as attnkit's."""

    def __init__(self, in_features: int, num_classes: int, heads: int = 8, hidden: int = 8, out_heads: int = 1,
                 dropout: float = 0.6):
        super().__init__()
        from torch_geometric.nn import GATConv

        self.p = dropout
        self.conv1 = GATConv(in_features, hidden, heads=heads, dropout=dropout, add_self_loops=False)
        self.conv2 = GATConv(heads * hidden, num_classes, heads=out_heads, concat=False, dropout=dropout,
                             add_self_loops=False)

    def forward(self, x, edge_index):
        x = F.dropout(x, self.p, self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, self.p, self.training)
        return self.conv2(x, edge_index)


def epoch_times(models: list[tuple[nn.Module, object]], ei, y, train_idx, repeats: int, warmup: int = 3
                ) -> list[float]:
    """Median seconds of one training epoch (forward, backward, Adam step) for each (model, x).

    The models' epochs are interleaved (A, B, A, B, ...) so that load from other jobs on a shared
    machine hits both alike."""
    opts = [torch.optim.Adam(m.parameters(), lr=0.005, weight_decay=5e-4) for m, _ in models]
    times: list[list[float]] = [[] for _ in models]
    for i in range(warmup + repeats):
        for k, ((m, x), opt) in enumerate(zip(models, opts)):
            m.train()
            t = time.perf_counter()
            opt.zero_grad()
            F.cross_entropy(m(x, ei)[train_idx], y[train_idx]).backward()
            opt.step()
            if i >= warmup:
                times[k].append(time.perf_counter() - t)
    return [statistics.median(t) for t in times]


def random_graph(n: int, e: int, f: int, c: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=g), torch.randint(0, n, (e,), generator=g)
    ei = add_self_loops(torch.stack([src, dst]), n)  # drops self-pairs and duplicates, adds N loops
    x = torch.rand(n, f, generator=g)
    y = torch.randint(0, c, (n,), generator=g)
    return x, ei, y, torch.arange(0, n, 300)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--accuracy-seeds", type=int, default=0)
    p.add_argument("--data-root", default=None)
    p.add_argument("--skip-random", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    import torch_geometric

    print(f"# torch {torch.__version__}, torch_geometric {torch_geometric.__version__}, {platform.machine()}, "
          f"threads {torch.get_num_threads()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| graph | nodes | edges (+loops) | features | attnkit ms/epoch | PyG GATConv ms/epoch | ratio PyG/attnkit |")
    print("|---|---|---|---|---|---|---|")
    g = load_planetoid("cora", args.data_root)
    ei = add_self_loops(g.edge_index, g.num_nodes)
    rows = []
    for label, x in (("Cora, sparse x", g.x.to_sparse_csr()), ("Cora, dense x", g.x)):
        torch.manual_seed(0)
        ours = GAT(GraphAttentionConfig(g.num_features, g.num_classes))
        torch.manual_seed(0)
        theirs = PygGAT(g.num_features, g.num_classes)
        t_ours, t_pyg = epoch_times([(ours, x), (theirs, g.x)], ei, g.y, g.train_idx, args.repeats)
        rows.append((label, g.num_nodes, ei.shape[1], g.num_features, t_ours, t_pyg))
    if not args.skip_random:
        x, rei, y, tr = random_graph(19717, 88648, 500, 3)
        torch.manual_seed(0)
        ours = GAT(GraphAttentionConfig(500, 3, out_heads=8))
        torch.manual_seed(0)
        theirs = PygGAT(500, 3, out_heads=8)
        rows.append(("random, PubMed size", 19717, rei.shape[1], 500,
                     *epoch_times([(ours, x), (theirs, x)], rei, y, tr, args.repeats)))
    for label, n, e, f, a, b in rows:
        print(f"| {label} | {n} | {e} | {f} | {1000 * a:.1f} | {1000 * b:.1f} | {b / a:.2f} |", flush=True)
    if args.accuracy_seeds:
        from graph_accuracy import PAPER, fit  # same directory

        hp = PAPER["cora"]
        acc = {"attnkit": [], "pyg": []}
        for s in range(args.accuracy_seeds):
            torch.manual_seed(s)
            r = fit(GAT(GraphAttentionConfig(g.num_features, g.num_classes)), g, g.x.to_sparse_csr(), ei,
                    lr=hp["lr"], weight_decay=hp["weight_decay"])
            acc["attnkit"].append(100 * r["test"])
            torch.manual_seed(s)
            r = fit(PygGAT(g.num_features, g.num_classes), g, g.x, ei, lr=hp["lr"], weight_decay=hp["weight_decay"])
            acc["pyg"].append(100 * r["test"])
        for k, v in acc.items():
            sd = statistics.stdev(v) if len(v) > 1 else 0.0
            print(f"Cora test accuracy, {k}, {len(v)} seeds, same loop: {statistics.mean(v):.2f} ± {sd:.2f} "
                  f"({' '.join(f'{a:.1f}' for a in v)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
