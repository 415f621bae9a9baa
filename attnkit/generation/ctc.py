"""CTC: the collapse rule, the one-pass (non-autoregressive) decoder, and prefix scores for joint decoding.

A CTC head labels every encoder frame with one of C classes, class ``blank`` meaning "no label here". A
frame labelling becomes a label sequence by merging repeats, then dropping blanks (``collapse``):
``a a _ a b b _`` -> ``a a b``. ``ctc_greedy`` is the one-pass decoder: every frame's best class at once,
collapsed (no search, no step-by-step loop).

``CTCPrefixScorer`` gives, for a prefix h and every label c, log P_ctc(h + c ...): the probability that the
labelling starts with h + c (Watanabe et al. 2017, "Hybrid CTC/attention architecture for end-to-end speech
recognition", Algorithm 2), and log P_ctc(h) exactly for END. These are a distribution over the next label
(plus END): P(h...) = P(h) + sum_c P(h + c ...). The recursions over frames are closed forms here
(cumulative sums and ``logcumsumexp`` in float64), so a step costs a few tensor operations, not a loop over
frames. ``ctc_beam_search`` is the attention decoder's beam search (``attnkit.generation.beam``'s rules,
the model reached through the same protocol) with each step's score (1 - w) log p_att + w log p_ctc.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from .beam import BeamState
from .logits import NEG_INF, constrain
from .protocol import TokenIds
from .search import Hypotheses, _step

__all__ = ["collapse", "ctc_greedy", "CTCPrefixScorer", "CTCState", "ctc_beam_search"]


def collapse(labels, blank: int = 0) -> list[int]:
    """A frame labelling (T,) -> its label sequence: repeats merged, then blanks dropped."""
    out, prev = [], None
    for x in (labels.tolist() if isinstance(labels, Tensor) else labels):
        if x != prev and x != blank:
            out.append(int(x))
        prev = x
    return out


def ctc_greedy(log_probs: Tensor, lengths: Tensor | None = None, blank: int = 0) -> list[list[int]]:
    """One pass: log_probs (B, T, C) -> per row the best class of each of its first ``lengths[b]`` frames,
    collapsed."""
    if log_probs.dim() != 3:
        raise ValueError(f"ctc_greedy: `log_probs` must be (B, T, C), got {tuple(log_probs.shape)}")
    best = log_probs.argmax(-1)  # (B, T)
    n = [best.shape[1]] * best.shape[0] if lengths is None else lengths.tolist()
    return [collapse(row[:k], blank) for row, k in zip(best, n)]


class CTCState(NamedTuple):
    r: Tensor  # (rows, T, 2) float64: log P(frames 0..t give the prefix, ending in a label / in blank)
    score: Tensor  # (rows,) float64: log P_ctc(prefix ...), 0 for the empty prefix
    last: Tensor  # (rows,) int64: the prefix's last label, -1 when empty


class CTCPrefixScorer:
    """Prefix scores over a batch's CTC outputs. log_probs (B, T, C) (log-softmax), lengths (B,) frames.

    ``initial()`` is the empty prefix of every row; ``extend(state, rows)`` scores every label after each
    state's prefix (``rows`` (R,): the utterance each state belongs to) -> (scores (R, C), END scores (R,),
    the new r of every extension (R, C, T, 2)); ``select`` keeps the chosen extensions.
    """

    def __init__(self, log_probs: Tensor, lengths: Tensor | None = None, blank: int = 0):
        if log_probs.dim() != 3:
            raise ValueError(f"CTCPrefixScorer: `log_probs` must be (B, T, C), got {tuple(log_probs.shape)}")
        b, t, c = log_probs.shape
        self.x = log_probs.double()  # (B, T, C)
        self.lengths = torch.full((b,), t, dtype=torch.long) if lengths is None else lengths.long().cpu()
        if self.lengths.shape != (b,) or bool((self.lengths < 1).any()) or bool((self.lengths > t).any()):
            raise ValueError(f"CTCPrefixScorer: `lengths` must be (B,) = ({b},) in [1, {t}], got {lengths}")
        self.blank, self.num_classes = blank, c
        self.cum_blank = self.x[..., blank].cumsum(1)  # (B, T): log P(blank at every frame 0..t)
        self.cum_x = self.x.cumsum(1)  # (B, T, C): log P(class c at every frame 0..t)
        frames = torch.arange(t)
        self.valid = frames[None, :] < self.lengths[:, None]  # (B, T)

    def initial(self) -> CTCState:
        b, t = self.cum_blank.shape
        r = torch.stack((torch.full((b, t), NEG_INF, dtype=torch.float64), self.cum_blank), dim=-1)  # (B, T, 2)
        return CTCState(r, torch.zeros(b, dtype=torch.float64), torch.full((b,), -1, dtype=torch.long))

    def extend(self, state: CTCState, rows: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Scores of every one-label extension of each prefix: (R, C), END (R,), their r (R, C, T, 2)."""
        r_n, r_b = state.r[..., 0], state.r[..., 1]  # (R, T)
        total = torch.logaddexp(r_n, r_b)  # (R, T): the prefix over frames 0..t, either ending
        # phi[t]: the prefix done by frame t and the new label may start at t + 1 (after a blank if it repeats)
        phi = total[:, None, :].expand(-1, self.num_classes, -1).clone()  # (R, C, T)
        repeat = state.last >= 0
        if bool(repeat.any()):
            idx = repeat.nonzero().squeeze(1)
            phi[idx, state.last[idx]] = r_b[idx]
        empty = (state.last < 0).double()  # phi[-1] = log 1 for the empty prefix, log 0 otherwise
        start = torch.where(empty > 0, 0.0, NEG_INF).to(torch.float64)  # (R,)
        phi_prev = torch.cat((start[:, None, None].expand(-1, self.num_classes, 1), phi[..., :-1]), dim=2)
        x = self.x[rows].transpose(1, 2)  # (R, C, T)
        cx = self.cum_x[rows].transpose(1, 2)  # (R, C, T): sum of x over frames 0..t
        cx_prev = torch.nn.functional.pad(cx[..., :-1], (1, 0))  # frames 0..t-1
        # r^n[t] = log sum_{s<=t} exp(phi[s-1] + x[s] + ... + x[t])
        new_n = cx + torch.logcumsumexp(phi_prev - cx_prev, dim=2)  # (R, C, T)
        # r^b[t] = log sum_{s<=t} exp(r^n[s-1] + b[s] + ... + b[t])
        cb = self.cum_blank[rows][:, None, :]  # (R, 1, T)
        n_prev = torch.nn.functional.pad(new_n[..., :-1], (1, 0), value=NEG_INF)
        cb_prev = torch.nn.functional.pad(cb[..., :-1], (1, 0))
        new_b = cb + torch.logcumsumexp(n_prev - cb_prev, dim=2)
        valid = self.valid[rows][:, None, :]  # (R, 1, T)
        scores = (phi_prev + x).masked_fill(~valid, NEG_INF).logsumexp(dim=2)  # (R, C): the label starts at some t
        scores[:, self.blank] = NEG_INF
        last = (self.lengths[rows] - 1)[:, None]  # (R, 1)
        end = total.gather(1, last).squeeze(1)  # (R,): log P(the labelling is exactly the prefix)
        return scores, end, torch.stack((new_n, new_b), dim=-1)

    @staticmethod
    def select(state: CTCState, parent: Tensor, label: Tensor, scores: Tensor, end: Tensor, r_new: Tensor,
               ended: Tensor) -> CTCState:
        """The states of the extensions chosen: parent (R',) rows of ``state``, label (R',) (any value where
        ``ended``: the prefix itself, scored by ``end``)."""
        safe = label.clamp(min=0)
        r = torch.where(ended[:, None, None], state.r[parent], r_new[parent, safe])
        score = torch.where(ended, end[parent], scores[parent, safe])
        last = torch.where(ended, state.last[parent], safe)
        return CTCState(r, score, last)


def _joint(att: Tensor, ctc: Tensor, weight: float) -> Tensor:
    """(1 - weight) att + weight ctc, where a weight of 0 leaves its term out (no 0 * -inf)."""
    if weight <= 0:
        return att
    if weight >= 1:
        return ctc
    return (1 - weight) * att + weight * ctc


def ctc_beam_search(model, memory: Tensor, mask: Tensor | None, ctc_log_probs: Tensor, ctc_lengths: Tensor,
                    ids: TokenIds, *, label_of: Tensor, num_beams: int, ctc_weight: float, max_new_tokens: int,
                    blank: int = 0, suppress: Tensor | None = None) -> Hypotheses:
    """Joint CTC/attention beam search over B utterances (rows = utterances x beams).

    ``label_of`` (V,): the CTC class of each decoder token (-1: none; END is scored by CTC's full-sequence
    probability). Each candidate's score is its parent's plus (1 - ctc_weight) log p_att(token) +
    ctc_weight (log P_ctc(prefix + token ...) - log P_ctc(prefix ...)). The rules of
    ``attnkit.generation.beam.beam_search`` with length_penalty 0 and early_stopping False, on its
    ``BeamState``: the 2K best continuations are ranked, one that ends and ranks among the first K joins the K
    finished, the K best that go on are the next beams; an utterance stops when its best running beam cannot
    beat its worst finished one (scores only fall). ``ctc_weight=0`` is that beam search exactly.
    """
    if not 0 <= ctc_weight <= 1:
        raise ValueError(f"ctc_beam_search: `ctc_weight` must be in [0, 1], got {ctc_weight!r}")
    scorer = CTCPrefixScorer(ctc_log_probs.cpu(), ctc_lengths.cpu(), blank) if ctc_weight > 0 else None
    state = scorer.initial() if scorer is not None else None
    label_of = label_of.long().cpu()
    utt = torch.arange(memory.shape[0])  # (rows,): the utterance of each row
    beams = BeamState(memory.shape[0], num_beams, max_new_tokens, ids, memory, 0.0, False)
    cache = None
    for step in range(max_new_tokens):
        expanding = beams.k != num_beams  # the first step: one row per utterance becomes K
        st = _step(model, beams.inputs(), memory, mask, cache, True, False)
        att = constrain(st.logp, step=step, eos_token_id=ids.eos, suppress=suppress).cpu()  # (bk, V)
        ctc = None if scorer is None else scorer.extend(state, utt)
        delta = att if ctc is None else _ctc_step(ctc, state, label_of, att, ids.eos, beams.scores.dtype)
        cand = beams.candidates(_joint(att, delta, ctc_weight).to(memory.device), step + 1)
        beams.finish(cand, step + 1, None)  # those that end join the finished ones
        rows = beams.advance(cand, None)  # the K best that go on
        if scorer is not None:
            lab = label_of[beams.tokens[:, :, -1].reshape(-1).cpu()]
            state = scorer.select(state, rows.cpu(), lab, *ctc, lab < 0)
        if expanding:
            memory = memory.index_select(0, rows)
            mask = None if mask is None else mask.index_select(0, rows)
            utt = utt[rows.cpu()]
        cache = model.reorder_cache(st.cache, rows, cross=expanding)
        if beams.stop(step + 1):
            break
    return beams.hypotheses()


def _ctc_step(ctc: tuple, state: CTCState, label_of: Tensor, att: Tensor, eos: int, dtype) -> Tensor:
    """log P_ctc(token | prefix) of every row and decoder token (bk, V): the prefix scores of ``scorer.extend``
    (``ctc``) minus the prefix's own; tokens with no CTC class -inf, END the full sequence's probability."""
    ctc_scores, ctc_end, _ = ctc
    known = label_of >= 0
    ctc_v = torch.full(att.shape, NEG_INF, dtype=torch.float64)
    ctc_v[:, known] = ctc_scores[:, label_of[known]]
    ctc_v[:, eos] = ctc_end
    return (ctc_v - state.score[:, None]).to(dtype)
