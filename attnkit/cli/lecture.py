"""``attnkit lecture``: the lecture's own example, matrix by matrix, told the same way in three places.

Four input vectors a^1..a^4 form I (one column each, as in the lecture). Example 1, one head, no scaling
(the lecture's A = K^T Q): Q = W^q I, K = W^k I, V = W^v I; A = K^T Q; A' = softmax over each column of A;
O = V A'. Example 2, two heads, each with its own W^{q,h}, W^{k,h}, W^{v,h}, scores scaled by 1/sqrt(d)
(d = 3, the head size), and W^o merging them. Every matrix is printed in full with its axes named (a
token's vectors are columns), so Q = W^q I can be checked by hand. The same two examples are the lecture
page (lecture.html: both examples in the menu, the chain for any head and query, the same matrices) and
lecture_attention.png (A' of example 1 and of example 2's two heads, one column per query).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..nn.limits import SEED
from .options import add_figures_option

if TYPE_CHECKING:  # torch is imported where the lecture runs, not to parse its options
    import torch

TOKENS = ["a1", "a2", "a3", "a4"]


def _labels(prefix: str, n: int, tag: str = "") -> list[str]:
    """Axis labels: "k" -> k^1, k^2, ...; with a head tag ",2" -> k^{1,2}, ... (the lecture's k^{i,h});
    "" -> 1, 2, ..."""
    if not prefix:
        return [str(i + 1) for i in range(n)]
    return [f"{prefix}^{{{i + 1}{tag}}}" if tag else f"{prefix}^{i + 1}" for i in range(n)]


def _show(name: str, t: torch.Tensor, rows: str, cols: str, note: str = "", tag: str = "",
          hidden: torch.Tensor | None = None, word: str = "masked") -> None:
    """Print matrix ``t`` in full with its layout: ``rows`` / ``cols`` name the axes (see ``_labels``); entries
    where ``hidden`` (bool, t's shape) is True read ``word``."""
    r, c = t.shape
    print(f"{name} ({r} x {c}){'  ' + note if note else ''}")
    print("        " + "".join(f"{x:>9}" for x in _labels(cols, c, tag)))
    for i, (label, row) in enumerate(zip(_labels(rows, r, tag), t.tolist())):
        cells = [f"{word:>9}" if hidden is not None and bool(hidden[i, j]) else f"{x:9.3f}" for j, x in enumerate(row)]
        print(f"{label:>8}" + "".join(cells))


def _head(I: torch.Tensor, w: tuple, scale: float, tag: str, mask: torch.Tensor | None = None):  # noqa: E741
    """One head of the example printed matrix by matrix (``tag``: "" or ",h" for head h); returns
    ``attnkit.explain``'s intermediates (batch-first). ``mask`` (Lq, Lk) bool, True = may attend: the masked
    scores read "masked" in A (set to -inf before the softmax) and their alpha' is 0."""
    import torch

    from ..functional import explain

    Wq, Wk, Wv = w
    sup = f"^{tag[1:]}" if tag else ""
    vec = (lambda x, i: f"{x}^{{{i}{tag}}}") if tag else (lambda x, i: f"{x}^{i}")  # q^i, or q^{i,h} of head h
    for m, n in ((Wq, "q"), (Wk, "k"), (Wv, "v")):
        _show(f"W^{{{n}{tag}}}" if tag else f"W^{n}", m, "", "")
    Q, K, V = Wq @ I, Wk @ I, Wv @ I
    wq = f"W^{{q{tag}}}" if tag else "W^q"
    _show(f"Q{sup} = {wq} I", Q, "", "q", f"column i is {vec('q', 'i')} = {wq} a^i", tag)
    _show(f"K{sup} = W^{{k{tag}}} I" if tag else "K = W^k I", K, "", "k", f"column j is {vec('k', 'j')}", tag)
    _show(f"V{sup} = W^{{v{tag}}} I" if tag else "V = W^v I", V, "", "v", f"column j is {vec('v', 'j')}", tag)
    ex = explain(Q.T, K.T, V.T, mask, score="scaled_dot", scale=scale)  # batch-first: rows are queries
    hidden = None if mask is None else ~mask.T  # (keys, queries), as A is printed
    d = Q.shape[0]
    scaled = "no scaling" if scale == 1 else f"scaled by 1/sqrt({d}) = {scale:.4f}"
    name = f"A{sup} = " + (f"(K{sup})^T" if tag else "K^T") + f" Q{sup}" + ("" if scale == 1 else f" / sqrt({d})")
    future = "" if mask is None else "; masked: key j after query i (j > i), set to -inf before the softmax"
    _show(name, ex.scores.T, "k", "q",
          f"row j: key {vec('k', 'j')}, column i: query {vec('q', 'i')}; {scaled}{future}", tag, hidden)
    _show(f"A'{sup} = softmax of each column of A{sup}", ex.weights.T, "k", "q", "each column sums to 1" + (
        "; a masked key gets alpha' = 0" if mask is not None else ""), tag, hidden, "0 masked")
    _show(f"O{sup} = V{sup} A'{sup}", ex.out.T, "", "b", f"column i is {vec('b', 'i')}", tag)
    assert torch.allclose(ex.scores.T, (K.T @ Q) * scale, atol=1e-5)
    assert mask is None or bool((ex.weights[~mask] == 0).all())
    assert torch.allclose(ex.out.T, V @ ex.weights.T, atol=1e-5)
    return ex


CAUSAL = ("The masked (causal) version, as a decoder's self-attention: query q^i may look at keys k^1..k^i only; "
          "a later key\n(j > i) is a token not written yet, its score is set to -inf before the softmax, so its "
          "alpha'_ij = 0.\n")


def run(out_dir: Path, seed: int = 0, d_in: int = 4, d_k: int = 3, causal: bool = False, figures: str = "both") -> dict:
    import torch

    g = torch.Generator().manual_seed(seed)
    I = torch.randn(d_in, 4, generator=g)  # noqa: E741  columns a^1..a^4
    single = tuple(torch.randn(d_k, d_in, generator=g) for _ in range(3))
    mask = torch.ones(4, 4).tril().bool() if causal else None  # (queries, keys), True = may attend
    print("The lecture's self-attention, matrix by matrix: a token's vectors are columns, as in the lecture.\n")
    if causal:
        print(CAUSAL)
    _show("I = [a^1 a^2 a^3 a^4]", I, "", "a", "column i is the input vector a^i")
    print("\nExample 1: one head, no scaling (A = K^T Q, as the lecture writes it)\n")
    ex = _head(I, single, 1.0, "", mask)

    scale = d_k ** -0.5
    print(f"\nExample 2: two heads, each score scaled by 1/sqrt(d) = 1/sqrt({d_k}) = {scale:.4f} (d = {d_k}, the head "
          f"size).\nEach head h has its own W^{{q,h}}, W^{{k,h}}, W^{{v,h}} (the lecture's q^{{i,h}} = W^{{q,h}} q^i, "
          "with W^q folded in); W^o merges the heads.\n")
    heads, weights = [], []
    for h in range(2):
        w = tuple(torch.randn(d_k, d_in, generator=g) for _ in range(3))
        print(f"head {h + 1}:")
        heads.append(_head(I, w, scale, f",{h + 1}", mask))
        weights.append(w)
    Wo = torch.randn(d_in, 2 * d_k, generator=g)
    _show("W^o", Wo, "", "", f"columns 1-{d_k} take head 1's b^{{i,1}}, columns {d_k + 1}-{2 * d_k} head 2's b^{{i,2}}")
    B = Wo @ torch.cat([e.out.T for e in heads], dim=0)  # (d_in, 2 d_k) @ (2 d_k, 4)
    _show("O = W^o [O^1; O^2]", B, "", "o", "column i is the layer's output o^i = W^o [b^{i,1}; b^{i,2}] "
                                             "(the lecture's b^i)")

    stem = "lecture_causal" if causal else "lecture"
    paths = {}
    if figures != "png":  # --figures html|png|both
        paths["page"] = _page(I, single, weights, Wo, d_k, out_dir / f"{stem}.html", mask)
        print(f"\nwrote {paths['page']} (both examples: the chain for any head and query, and these matrices)")
    if figures == "html":
        return paths
    try:
        from ..viz.heatmap import attention_panels
    except ImportError:
        print("(matplotlib is not installed: no PNG written; pip install 'attnkit[viz]')")
        return paths
    panels = [(ex.weights, "example 1: one head,\nno scaling")]
    panels += [(e.weights, f"example 2, head {h + 1}:\nscaled by 1/sqrt({d_k})") for h, e in enumerate(heads)]
    paths["attention"] = attention_panels(panels, out_dir / f"{stem}_attention.png", queries=TOKENS, keys=TOKENS,
                                          title="A' = softmax of each column of A: one column per query" + (
                                              "\nmasked (causal): a key after its query (j > i) gets \u03b1' = 0"
                                              if causal else ""), mask=mask)
    print(f"wrote {paths['attention']} (A' of both examples, one column per query)")
    return paths


def _page(I: torch.Tensor, single: tuple, weights: list, Wo: torch.Tensor, d_k: int, path: Path,  # noqa: E741
          mask: torch.Tensor | None = None) -> Path:
    """Both examples as the lecture page: a^1..a^4 as tokens; example 1 with one head, no scaling and no W^o;
    example 2 with two heads, scaled, merged by W^o; the inputs and weights stored in full; ``mask`` (the causal
    version) on both."""
    import torch

    from ..viz.heads import LayerParts
    from ..viz.lecture import lecture_html

    def layer(ws: list, w_o):
        q, k, v = (torch.stack([w[i] @ I for w in ws]).mT for i in range(3))  # (H, d_k, 4) -> (H, 4, d_k)
        mats = {"a": I.T, **{name: torch.stack([w[i] for w in ws]) for i, name in enumerate(("w_q", "w_k", "w_v"))}}
        return LayerParts(q, k, v, w_o, None, mask), mats

    (one, m1), (two, m2) = layer([single], None), layer(weights, Wo)
    return lecture_html([one, two], TOKENS, path, scale=[1.0, d_k ** -0.5], matrices=[m1, m2], layer_word="example",
                        layer_names=["example 1: one head, no scaling",
                                     f"example 2: two heads, scaled by 1/\u221a{d_k}"],
                        title=f"attnkit lecture: {'masked (causal) ' if mask is not None else ''}self-attention, "
                              "step by step",
                        notes=f"The lecture's small example (attnkit lecture prints the same matrices): four input "
                              "vectors a^1..a^4. Example 1: one head, no scaling, no W^o (O = V A'). Example 2: two "
                              f"heads with their own W^q, W^k, W^v, scores scaled by 1/\u221ad (d = {d_k}), W^o "
                              "merging them." + ("" if mask is None else " Masked (causal), as a decoder's "
                              "self-attention: q^i sees k^1..k^i; a later key is masked, its \u03b1' = 0."))


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lecture", help="walk the lecture's example: I -> Q, K, V -> A -> A' -> O, one head unscaled, "
                                       "then two scaled heads and W^o")
    p.add_argument("--out", type=Path, default=Path("runs/lecture"),
                   help="folder for lecture.html and lecture_attention.png")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the example's matrices")
    p.add_argument("--causal", action="store_true",
                   help="the masked version, as a decoder's self-attention: q^i sees k^1..k^i, a later key's "
                        "alpha' is 0 (writes lecture_causal.html and lecture_causal_attention.png)")
    add_figures_option(p, "lecture.html", "lecture_attention.png")
    p.set_defaults(func=lambda a: run(a.out, a.seed, causal=a.causal, figures=a.figures))
