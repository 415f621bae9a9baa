"""Edge-only attention: gather / segment-softmax / scatter, in O(E * d) time and memory.

For a graph mask (``attnkit.masks.graph(edge_index, num_nodes)``) query node ``t`` attends to key
node ``s`` for every edge column (s, t). Per edge e = (s, t):

    score_e = scale * q_t . k_s (+ bias_e)          gather q[t], k[s]          (..., E)
    w_e     = exp(score_e) / sum_{e' -> t} exp(...)  segment softmax over t
    out_t   = sum_{e -> t} w_e v_s                    scatter-add into t         (..., N, dv)

Nodes with no incoming edge get a zero output (never NaN). The backend treats the edge list as a
set, like the dense adjacency mask it replaces: duplicate edges are merged (their edge biases add
up, as in ``EdgeBias.materialize``). The pure building blocks below (``segment_softmax``,
``edge_attention``) take the edge list as given, so a GAT layer can use them with its own scores.
Backward is plain autograd through gather / index_add (memory O(E * d)). Only edges are ever read,
so a NaN / inf on a node pair without an edge cannot reach the output.
Takes a graph mask alone, any bias (an ``EdgeBias`` per edge; others are materialised and read at the
edges), autograd and dropout, every dtype, any device with data; no weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..bias import Bias, EdgeBias
from ..masks import Mask, check_edge_index, graph_of
from . import Backend, Call, register_backend

__all__ = ["segment_softmax", "edge_attention", "edge_scores", "graph_attention", "check_edge_index"]


def segment_softmax(scores: Tensor, index: Tensor, num_nodes: int) -> Tensor:
    """Softmax of ``scores`` (E, ...) within the groups of edges sharing ``index`` (E,) -> (E, ...).

    Groups are node ids in [0, num_nodes). Entries of -inf get weight 0; a group with only -inf
    entries gets all zeros. bfloat16/float16 scores are normalised in float32.
    """
    if index.dim() != 1 or index.shape[0] != scores.shape[0]:
        raise ValueError(f"segment_softmax: `index` must have shape (E,) with E={scores.shape[0]}, "
                         f"got {tuple(index.shape)}")
    index = index.long()
    work = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    rest = work.shape[1:]
    idx = index.view(-1, *([1] * len(rest))).expand_as(work)  # (E, ...)
    mx = work.new_zeros((num_nodes, *rest)).scatter_reduce(0, idx, work.detach(), "amax", include_self=False)
    mx = torch.where(torch.isfinite(mx), mx, 0.0)  # (N, ...) stabiliser, no gradient
    e = (work - mx.index_select(0, index)).exp()  # (E, ...)
    den = work.new_zeros((num_nodes, *rest)).index_add(0, index, e)  # (N, ...)
    return (e / den.index_select(0, index).clamp_min(1e-30)).to(scores.dtype)


def edge_attention(scores: Tensor, v: Tensor, edge_index: Tensor, num_nodes: int | None = None, *,
                   dropout_p: float = 0.0, return_weights: bool = False):
    """Attention from precomputed per-edge scores.

    Args:
        scores: (E, H) (or (E,)) unnormalised score of each edge (s, t), e.g. GAT's LeakyReLU scores.
        v: (N, H, dv) (or (N, dv)) values of the source nodes.
        edge_index: (2, E) rows (source s, target t); target t attends to source s.
        num_nodes: N (defaults to ``v.shape[0]``).
        dropout_p: dropout on the normalised edge weights.

    Returns:
        out (N, H, dv) (or (N, dv)) = sum over edges into t of softmax_t(scores) * v[s]; nodes with
        no incoming edge get zeros. With ``return_weights``: (out, weights (E, H)).
    """
    n = v.shape[0] if num_nodes is None else num_nodes
    check_edge_index(edge_index, n)
    if scores.shape[0] != edge_index.shape[1] or scores.shape[1:] != v.shape[1:-1]:
        raise ValueError(f"edge_attention: `scores` must have shape (E={edge_index.shape[1]}, "
                         f"*{tuple(v.shape[1:-1])}) to match v {tuple(v.shape)}, got {tuple(scores.shape)}")
    src, dst = edge_index[0].long(), edge_index[1].long()
    w = segment_softmax(scores, dst, n)  # (E, H)
    dropped = F.dropout(w, dropout_p) if dropout_p > 0 else w
    msg = dropped.unsqueeze(-1).to(v.dtype) * v.index_select(0, src)  # (E, H, dv)
    out = v.new_zeros((n, *v.shape[1:])).index_add(0, dst, msg)  # (N, H, dv)
    return (out, w) if return_weights else out


def edge_scores(q: Tensor, k: Tensor, edge_index: Tensor, scale: float) -> Tensor:
    """Scaled dot products along edges: q (N, ..., d), k (N, ..., d) -> (E, ...) = scale * q[t] . k[s]."""
    src, dst = edge_index[0].long(), edge_index[1].long()
    return (q.index_select(0, dst) * k.index_select(0, src)).sum(-1) * scale  # (E, ...)


def _dedupe(edge_index: Tensor, num_nodes: int, values: Tensor | None):
    """Merge duplicate (s, t) columns; edge values of duplicates add up."""
    key = edge_index[1].long() * num_nodes + edge_index[0].long()  # (E,)
    uniq, inverse = torch.unique(key, return_inverse=True)  # (U,), (E,)
    if uniq.numel() == key.numel():
        return edge_index.long(), values
    ei = torch.stack((uniq % num_nodes, uniq // num_nodes))  # (2, U)
    if values is not None:
        values = values.new_zeros((uniq.numel(), *values.shape[1:])).index_add(0, inverse, values)
    return ei, values


def _edge_bias(bias, edge_index: Tensor, n: int, lead: tuple[int, ...], device) -> Tensor | None:
    """Per-edge bias (E, M) for M = prod(lead) flattened rows; None if no bias."""
    if bias is None:
        return None
    if isinstance(bias, EdgeBias):
        val = bias.values  # (E,) or (E, H), already merged over duplicates by the caller
    else:  # any other bias: materialise (quadratic memory) and read it at the edges
        dense = bias.materialize(n, n, device) if isinstance(bias, Bias) else bias  # (..., N, N)
        dense = dense.to(device).expand(*lead, n, n)  # broadcast (a (N,) bias too) to (*lead, N, N)
        val = dense[..., edge_index[1], edge_index[0]].reshape(math.prod(lead), edge_index.shape[1]).T  # (E, M)
        return val
    e = val.shape[0]
    if val.dim() == 1:
        return val.unsqueeze(1)  # (E, 1) broadcasts over all rows
    h = val.shape[1]
    if not lead or lead[-1] != h:
        raise ValueError(f"graph: EdgeBias has {h} heads but q has leading dims {lead}; expected (..., H={h}, N, d)")
    return val.view(e, *([1] * (len(lead) - 1)), h).expand(e, *lead).reshape(e, math.prod(lead))  # (E, M)


def graph_attention(q: Tensor, k: Tensor, v: Tensor, edge_index: Tensor, num_nodes: int, scale: float,
                    bias=None, dropout_p: float = 0.0) -> Tensor:
    """Dense-equivalent graph attention: q, k (..., N, d), v (..., N, dv) -> (..., N, dv).

    Duplicate edges are merged (set semantics). ``bias``: None, an ``EdgeBias`` on the same
    ``edge_index``, or any dense / structured bias (then materialised and read at the edges).
    """
    lead, n = q.shape[:-2], q.shape[-2]
    values = None
    if isinstance(bias, EdgeBias):
        if bias.edge_index.shape != edge_index.shape or not torch.equal(bias.edge_index.to(edge_index.device),
                                                                       edge_index):
            raise ValueError("graph: EdgeBias `edge_index` must equal the graph mask's `edge_index`")
        values = bias.values
    ei, values = _dedupe(edge_index.to(q.device), n, values)
    if values is not None:
        bias = EdgeBias(ei, values, n)
    rows = math.prod(lead)  # M
    qn = q.reshape(rows, n, q.shape[-1]).transpose(0, 1)  # (N, M, d)
    kn = k.reshape(rows, n, k.shape[-1]).transpose(0, 1)  # (N, M, d)
    vn = v.reshape(rows, n, v.shape[-1]).transpose(0, 1)  # (N, M, dv)
    if q.dtype == torch.float16:  # float16 scores overflow at 65504: computed in float32 (the NaN / inf policy)
        qn, kn = qn.float(), kn.float()
    s = edge_scores(qn, kn, ei, scale)  # (E, M)
    eb = _edge_bias(bias, ei, n, tuple(lead), q.device)
    if eb is not None:
        s = s + eb.to(s.dtype)
    out = edge_attention(s, vn, ei, n, dropout_p=dropout_p)  # (N, M, dv)
    return out.transpose(0, 1).reshape(*lead, n, v.shape[-1])  # (..., N, dv)


def refuse(c: Call) -> str | None:
    if graph_of(c.mask) is None:
        return f"backend 'graph' needs a graph mask (attnkit.masks.graph) on its own, got {c.mask!r}"
    return None


def graph_backend(q: Tensor, k: Tensor, v: Tensor, mask: Mask | None, bias, scale: float,
                  dropout_p: float, need_weights: bool) -> tuple[Tensor, None]:
    """Backend "graph": a ``graph`` mask alone; q, k (..., N, d), v (..., N, dv)."""
    g = graph_of(mask)
    return graph_attention(q, k, v, g.edge_index, g.num_nodes, scale, bias, dropout_p), None


register_backend(Backend(
    "graph", graph_backend, "edge-only attention: gather, segment softmax, scatter, O(E * d)",
    masks="graph alone", refuse=refuse))
