"""Graph attention for node classification: attention computed only along edges.

Two forms of the score on an edge s -> t (node t attends to its neighbour s):

- ``additive`` (GAT, Velickovic et al. 2018): e_ts = LeakyReLU(a_dst . W x_t + a_src . W x_s), one
  vector pair (a_src, a_dst) per head; softmax over t's in-edges; out_t = sum_s alpha_ts W x_s.
  Computed edge by edge with ``attnkit.functional.backends.graph.edge_attention`` (gather, segment
  softmax, scatter). O(E H C) time and memory.
- ``dot``: q_t . k_s / sqrt(C) per head with ``attnkit.attention`` and ``masks.graph`` (the graph
  backend runs it on edges only; without it, a dense mask is used). ``qk_source="input"`` (default)
  takes q = W^q x and k = W^k x from the layer's input, as in the lecture; ``"projected"`` takes them
  from the projected node vector, q = W^q_h (W x)_h with a small C x C map per head, so the scores add
  2 H C^2 parameters instead of 2 H C F_in (on bag-of-words inputs, F_in is in the thousands).

Dot form, optional: SuperGAT's self-supervised edge loss (Kim & Oh 2021), which trains the attention
logits q_t . k_s to tell real edges from random node pairs (``GAT.forward(..., link_pairs=...)``,
``link_loss`` in the config; ``bench/graph_accuracy.py --link-loss``, ``attnkit train graph --link-loss``).

``GAT`` stacks two layers as in the paper's transductive setting: dropout on inputs and attention
weights, H heads x C hidden concatenated, ELU, then an output layer of ``out_heads`` heads averaged.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import masks
from ..functional import attention
from ..functional.backends.graph import edge_attention
from ..functional.dropout import dropout16
from ..functional.masks import check_edge_index
from .configs.graph import QK_SOURCES, SCORES, GraphAttentionConfig

__all__ = ["GraphAttentionConfig", "GraphAttention", "GAT", "add_self_loops", "feature_dropout", "link_pairs",
           "SCORES", "QK_SOURCES"]

def add_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Drop existing self-loops, add one per node, sort by target then source. (2, E) -> (2, E')."""
    ei = edge_index[:, edge_index[0] != edge_index[1]]
    loops = torch.arange(num_nodes, device=ei.device).unsqueeze(0).expand(2, -1)  # (2, N)
    ei = torch.cat([ei, loops], dim=1)
    key = torch.unique(ei[1] * num_nodes + ei[0])  # sorted by (target, source), duplicates removed
    return torch.stack([key % num_nodes, key // num_nodes])


def link_pairs(edge_index: Tensor, num_nodes: int, negatives_per_edge: float) -> tuple[Tensor, Tensor]:
    """Pairs for the self-supervised edge loss: the real edges without self-loops, positives (2, P), and
    round(negatives_per_edge * P) uniformly random node pairs, negatives (2, Q), drawn afresh each call."""
    positives = edge_index[:, edge_index[0] != edge_index[1]]  # (2, P)
    n_neg = max(1, round(negatives_per_edge * positives.shape[1]))
    return positives, torch.randint(0, num_nodes, (2, n_neg), device=edge_index.device)  # (2, P), (2, Q)


def feature_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout on the input features. Sparse (COO or CSR): only the stored values are dropped, which
    equals dense dropout on the same matrix (zeros stay zero) at a fraction of the cost. Dense: the
    16-bit-field dropout (``functional.dropout.dropout16``, p rounded to 1/65536), faster than ``F.dropout`` on a
    PubMed-size input, where the draw is most of an epoch (BENCHMARKS.md, "Graph attention speed")."""
    if not training or p == 0.0:
        return x
    if x.layout == torch.sparse_coo:
        x = x.coalesce()
        return torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), p), x.shape, is_coalesced=True,
                                       check_invariants=False)
    if x.layout == torch.sparse_csr:
        return torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(), F.dropout(x.values(), p), x.shape,
                                       check_invariants=False)
    return dropout16(x, p)


def _linear(x: Tensor, weight: Tensor) -> Tensor:
    """x (N, F) dense or sparse @ weight.T (F, D) -> (N, D) dense."""
    return x @ weight.t() if x.layout != torch.strided else F.linear(x, weight)


class GraphAttention(nn.Module):
    """One graph-attention layer. x (N, F_in) -> (N, H*C) if ``concat`` else (N, C) (heads averaged).

    ``edge_index`` (2, E) must already contain the self-loops the model wants (see ``add_self_loops``).
    """

    def __init__(self, in_features: int, out_features: int, heads: int, *, concat: bool = True,
                 score: str = "additive", negative_slope: float = 0.2, attention_dropout: float = 0.0,
                 value_dropout: float = 0.0, qk_source: str = "input", device=None, dtype=None):
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"GraphAttention: `score` must be one of {SCORES}, got {score!r}")
        if qk_source not in QK_SOURCES:
            raise ValueError(f"GraphAttention: `qk_source` must be one of {QK_SOURCES}, got {qk_source!r}")
        fk = {"device": device, "dtype": dtype}
        self.heads, self.out_features, self.concat, self.score = heads, out_features, concat, score
        self.negative_slope, self.attention_dropout = negative_slope, attention_dropout
        self.value_dropout, self.qk_source = value_dropout, qk_source
        self.lin = nn.Linear(in_features, heads * out_features, bias=False, **fk)  # W (values)
        if score == "additive":
            self.att_src = nn.Parameter(torch.empty(1, heads, out_features, **fk))
            self.att_dst = nn.Parameter(torch.empty(1, heads, out_features, **fk))
        elif qk_source == "input":
            self.qk = nn.Linear(in_features, 2 * heads * out_features, bias=False, **fk)  # W^q; W^k
        else:  # per head: (W x)_h (C) -> q_h; k_h (2C)
            self.qk_proj = nn.Parameter(torch.empty(heads, out_features, 2 * out_features, **fk))
        self.bias = nn.Parameter(torch.zeros(heads * out_features if concat else out_features, **fk))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform per head, as in the GAT authors' code: W as H maps F_in -> C (bound
        sqrt(6 / (F_in + C))), each attention vector as a map C -> 1 (bound sqrt(6 / (C + 1))).
        (Glorot over the packed (H*C, F_in) matrix gives smaller weights; on CiteSeer, 6 seeds,
        that scored 71.77 against 72.45 with the per-head bounds.)"""
        fan_in, c = self.lin.in_features, self.out_features
        bound = math.sqrt(6.0 / (fan_in + c))
        nn.init.uniform_(self.lin.weight, -bound, bound)
        if self.score == "additive":
            att = math.sqrt(6.0 / (c + 1))
            nn.init.uniform_(self.att_src, -att, att)
            nn.init.uniform_(self.att_dst, -att, att)
        elif self.qk_source == "input":
            nn.init.uniform_(self.qk.weight, -bound, bound)
        else:
            nn.init.uniform_(self.qk_proj, -math.sqrt(6.0 / (3 * c)), math.sqrt(6.0 / (3 * c)))
        nn.init.zeros_(self.bias)

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """v = W x (N, H, C), and for the dot form q, k (N, H, C) from x (N, F_in) or from v."""
        n, h, c = x.shape[0], self.heads, self.out_features
        v = _linear(x, self.lin.weight).view(n, h, c)  # (N, H*C) -> (N, H, C)
        if self.score == "additive":
            return v, None, None
        if self.qk_source == "input":
            q, k = _linear(x, self.qk.weight).view(n, 2, h, c).unbind(1)  # (N, 2*H*C) -> 2 x (N, H, C)
        else:
            q, k = torch.einsum("nhc,hcd->nhd", v, self.qk_proj).split(c, dim=-1)  # 2 x (N, H, C)
        return v, q, k

    def _pair_logits(self, q: Tensor, k: Tensor, pairs: Tensor) -> Tensor:
        """q_t . k_s / sqrt(C) for pairs (2, P) = (s, t): (P, H)."""
        return (q.index_select(0, pairs[1]) * k.index_select(0, pairs[0])).sum(-1) / math.sqrt(self.out_features)

    def link_logits(self, x: Tensor, pairs: Tensor) -> Tensor:
        """Dot form: the attention logits q_t . k_s / sqrt(C) of node pairs ``pairs`` (2, P) = (s, t),
        whether or not they are edges: (P, H). What the self-supervised edge loss trains (SuperGAT)."""
        if self.score != "dot":
            raise ValueError("GraphAttention.link_logits: needs score='dot'")
        _, q, k = self._project(x)
        return self._pair_logits(q, k, pairs)

    def forward(self, x: Tensor, edge_index: Tensor, *, need_weights: bool = False
                ) -> tuple[Tensor, Tensor | None]:
        """Returns (out, weights (E, H) per edge for the additive form, None otherwise or if not asked)."""
        return self._aggregate(self._project(x), edge_index, need_weights)

    def _aggregate(self, projected: tuple[Tensor, Tensor | None, Tensor | None], edge_index: Tensor,
                   need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """The layer's output from ``_project``'s (v, q, k); see ``forward``."""
        v, q, k = projected
        n, h, c = v.shape
        p = self.attention_dropout if self.training else 0.0
        weights = None
        # the values are dropped; the scores, in both forms, come from the undropped projections
        vals = F.dropout(v, self.value_dropout, self.training) if self.value_dropout else v
        if self.score == "additive":
            src, dst = edge_index[0], edge_index[1]
            a_src = (v * self.att_src).sum(-1)  # (N, H)
            a_dst = (v * self.att_dst).sum(-1)  # (N, H)
            e = F.leaky_relu(a_src.index_select(0, src) + a_dst.index_select(0, dst), self.negative_slope)  # (E, H)
            # segment softmax over each target's in-edges, dropout, weighted scatter of v[src]: (N, H, C)
            res = edge_attention(e, vals, edge_index, n, dropout_p=p, return_weights=need_weights)
            out, weights = res if need_weights else (res, None)
        else:
            out = attention(q.transpose(0, 1), k.transpose(0, 1), vals.transpose(0, 1),  # (H, N, C) each
                            masks.graph(edge_index, n), dropout_p=p)  # (H, N, C)
            out = out.transpose(0, 1)  # (H, N, C) -> (N, H, C)
        out = out.reshape(n, h * c) if self.concat else out.mean(1)  # (N, H*C) or (N, C)
        return out + self.bias, weights


class GAT(nn.Module):
    """Two graph-attention layers: dropout, H x C concat + ELU, dropout, ``out_heads`` averaged.

    forward(x (N, F) dense or sparse COO/CSR, edge_index (2, E) with self-loops) -> logits (N, num_classes).
    Sparse bag-of-words features make input dropout and the first projection touch only non-zeros.
    """

    def __init__(self, config: GraphAttentionConfig, *, device=None, dtype=None):
        super().__init__()
        self.config = c = config
        kw = {"score": c.score, "negative_slope": c.negative_slope, "attention_dropout": c.attention_dropout,
              "value_dropout": c.value_dropout, "qk_source": c.qk_source, "device": device, "dtype": dtype}
        self.layer1 = GraphAttention(c.in_features, c.hidden, c.heads, concat=True, **kw)
        self.layer2 = GraphAttention(c.heads * c.hidden, c.num_classes, c.out_heads, concat=False, **kw)

    def forward(self, x: Tensor, edge_index: Tensor, *, link_pairs: tuple[Tensor, Tensor] | None = None
                ) -> Tensor | tuple[Tensor, Tensor]:
        """Logits (N, num_classes). With ``link_pairs`` = (positives (2, P), negatives (2, Q)) also the
        self-supervised edge loss of SuperGAT (Kim & Oh 2021), returned as (logits, loss): in each layer,
        binary cross-entropy of the attention logits q_t . k_s / sqrt(C) with 1 on the real edges
        ``positives`` and 0 on the random pairs ``negatives``, averaged over heads and layers, on the same
        (dropped-out) layer inputs as the classification. Dot form only."""
        if x.dim() != 2 or x.shape[1] != self.config.in_features:
            raise ValueError(f"GAT: `x` must have shape (N, {self.config.in_features}), got {tuple(x.shape)}")
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"GAT: `edge_index` must have shape (2, E), got {tuple(edge_index.shape)}")
        if link_pairs is None:
            return self._run(x, edge_index, None)[0]
        if self.config.score != "dot":
            raise ValueError("GAT: `link_pairs` needs score='dot'")
        positives, negatives = link_pairs
        for name, t in (("positives", positives), ("negatives", negatives)):
            check_edge_index(t, x.shape[0], name)
        pairs = torch.cat([positives, negatives], dim=1)  # (2, P + Q)
        target = torch.cat([torch.ones(positives.shape[1], device=x.device),
                            torch.zeros(negatives.shape[1], device=x.device)])
        return self._run(x, edge_index, (pairs, target))

    def _run(self, x: Tensor, edge_index: Tensor, link: tuple[Tensor, Tensor] | None) -> tuple[Tensor, Tensor | None]:
        p = self.config.dropout
        losses = []
        for i, layer in enumerate((self.layer1, self.layer2)):
            x = feature_dropout(x, p, self.training) if i == 0 else F.dropout(x, p, self.training)
            projected = layer._project(x)  # (v, q, k): shared by the edge loss and the layer's output
            if link is not None:
                logits = layer._pair_logits(projected[1], projected[2], link[0])  # (P + Q, H)
                losses.append(F.binary_cross_entropy_with_logits(logits, link[1].unsqueeze(1).expand_as(logits)))
            x = layer._aggregate(projected, edge_index, False)[0]
            if i == 0:
                x = F.elu(x)
        return x, (torch.stack(losses).mean() if losses else None)
