"""The non-autoregressive side of the translate task: ``attnkit train translate --decoder nat [--teacher RUN]``.

Builds ``models.nat.NATModel`` (same vocabulary, embeddings and stacks as the autoregressive model,
decoder self-attention unmasked, plus a length classifier or a row cut at END), trains it as
Mask-Predict does (a random number of target tokens masked, predicted from the rest, + the length
loss), by glancing training or by CTC (``--nat-loss``, ``models.nat_losses``), optionally on the teacher's
beam-search outputs (``distill.py``). A NAT run loads as ``NATTranslator``: the same ``translate`` /
``generate`` calls, decoded by ``attnkit.generation.mask_predict`` (``iterations``, ``length_candidates``)
or, for a CTC run, ``attnkit.generation.ctc_nat.ctc_decode`` (one pass). ``NAT`` is this side's
``translation.Decoding``, a sibling of the autoregressive one (``translate_ar.AR``).
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.bpe import EOS_ID, PAD_ID, UNK_ID
from ..generation.ctc_nat import ctc_decode
from ..generation.mask_predict import NATOutput, mask_predict
from ..inference.dtypes import DType
from ..models.nat import (
    NATConfig,
    NATModel,
    ctc_row_lengths,
    length_classes,
    random_mask,
    row_lengths_for,
)
from ..models.nat_losses import IGNORE, best_path, ctc_feasible, ctc_logits, ctc_loss, glat_logits
from ..train import Task
from ..train.checkpoint import CheckpointError, load_meta, load_weights
from .distill import distill
from .translation import Decoding, subwords_for
from .translator import Alignment, Translator

NAT_OPTIONS = ("iterations", "length_candidates", "suppress_tokens", "blank_penalty")
CTC_BLANK = "_"  # how a CTC run's attention map labels a position that wrote the blank


def check_arguments(args) -> None:
    for name in ("iterations", "length_candidates", "distill_beam"):
        if getattr(args, name) < 1:
            raise ValueError(f"train translate: --{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")


def targets(args, train, out: Path) -> tuple[list[str], dict | None]:
    """The target side to train on: the teacher's translations (distilled) or the corpus's own."""
    if args.teacher is None:
        return train.tgt, None
    src_lang, tgt_lang = (args.src, args.tgt) if not args.train_src else (str(args.train_src), str(args.train_tgt))
    lines, note = distill(args.teacher, train.src, out, src_lang=src_lang, tgt_lang=tgt_lang, beam=args.distill_beam)
    print(f"distillation: {note['sources']} sentences, beam {note['beam']}, "
          f"{'from the cache ' + note['file'] if note['cached'] else 'decoded in ' + str(note['seconds']) + ' s'}",
          file=sys.stderr, flush=True)
    return lines, note


def _init_run(run: Path) -> tuple[Path, dict]:
    """--init: the run's best checkpoint folder and meta; a clear error unless it is an autoregressive translation."""
    folder, meta = load_meta(Path(run), which="best")
    if meta.get("task") != "translate" or meta.get("decoder", "ar") != "ar":
        kind = meta.get("task") if meta.get("task") != "translate" else "non-autoregressive translation"
        raise CheckpointError(f"--init: {folder} is a {kind} run; give an autoregressive translation run")
    return folder, meta


def init_subwords(run: Path):
    """--init: the starting run's BPE vocabulary (its embedding rows are those subwords)."""
    folder, meta = _init_run(run)
    return subwords_for(folder, meta)


def initialise(model: NATModel, run: Path) -> dict:
    """--init: the AR run's weights into ``model`` (all of them must fit; the length head keeps its random
    start; a decoder of fewer layers than the AR run's takes its first ones) -> a note for the run's meta."""
    folder, meta = _init_run(run)
    ours = model.config.transformer.num_decoder_layers
    theirs = int(meta.get("model", {}).get("transformer", {}).get("num_decoder_layers", ours))
    if theirs < ours:
        raise CheckpointError(f"--init: {folder} has {theirs} decoder layers, fewer than --num-decoder-layers "
                              f"{ours}; give at most {theirs}")
    left_out = tuple(f"decoder.layers.{i}." for i in range(ours, theirs))
    fresh = load_weights(folder, model, missing_ok=("length_head.",), unused_ok=left_out)
    dropped = f"; its decoder layers {ours}-{theirs - 1} left out" if left_out else ""
    print(f"initialised from {folder} ({len(fresh)} tensors of the length classifier start fresh{dropped})",
          file=sys.stderr, flush=True)
    return {"run": str(run), "checkpoint": folder.name, "step": meta.get("step"), "decoder_layers": ours}


def config(args, seq2seq_fields: dict) -> NATConfig:
    if args.nat_loss == "ctc" and args.length != "classifier":
        raise ValueError("train translate: --length end does not go with --nat-loss ctc (CTC's alignment decides "
                         "the length)")
    return NATConfig(**seq2seq_fields, length=args.length, length_loss_weight=args.length_loss_weight,
                     nat_loss=args.nat_loss, glat_ratio=args.glat_ratio, ctc_upsample=args.ctc_upsample)


def encode_row(subwords, src: str, tgt: str, max_length: int, cfg: NATConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(source ids + END, target ids) for "classifier", (source ids + END, target ids + END) for "end"."""
    s = subwords.encode(src)[: max_length - 1] + [EOS_ID]
    t = subwords.encode(tgt)[: max_length - 1]
    return torch.tensor(s), torch.tensor(t + [EOS_ID] if cfg.length == "end" else t, dtype=torch.long)


def collate(examples, cfg: NATConfig):
    """[(src (S_i,), row (T_i,))] -> src (B, S), src mask (B, S), target rows (B, W), row lengths (B,).

    "end": each row is filled with END up to ``row_lengths_for`` its source (at least its own length)."""
    b = len(examples)
    src_len = torch.tensor([len(e[0]) for e in examples])
    lengths = torch.tensor([len(e[1]) for e in examples])
    fill = EOS_ID
    if cfg.length == "end":
        lengths = torch.maximum(lengths, row_lengths_for(src_len, cfg))
    src = torch.full((b, int(src_len.max())), PAD_ID, dtype=torch.long)
    rows = torch.full((b, max(int(lengths.max()), 1)), PAD_ID, dtype=torch.long)
    for i, (s, t) in enumerate(examples):
        src[i, :len(s)] = s
        rows[i, :len(t)] = t
        rows[i, len(t):int(lengths[i])] = fill  # "end" only: lengths[i] > len(t) there
    return src, (src != PAD_ID).long(), rows, lengths


def forward(model, batch, cfg: NATConfig):
    """The training loss of ``cfg.nat_loss`` on one batch: (logits (M, V), targets (M,)[, extra loss])."""
    if cfg.nat_loss == "ctc":
        return ctc_forward(model, batch, cfg)
    src, mask, rows, lengths = batch
    gen = None if model.training else torch.Generator(device=rows.device).manual_seed(0)  # dev: fixed masks
    if cfg.nat_loss == "glat":
        logits, masked, memory = glat_logits(model, src, mask, rows, lengths, cfg.glat_ratio, gen)
        length_logits = model.length_logits(memory, mask) if model.length_head is not None else None
    else:  # Mask-Predict: mask n ~ U{1..T} target tokens, predict them
        masked = random_mask(lengths, rows.shape[1], gen)  # (B, W)
        logits, length_logits = model(src, mask, rows.masked_fill(masked, cfg.mask_id), lengths, masked)  # (M, V)
    out = (logits, rows[masked])  # the masked positions only
    if length_logits is None or cfg.length_loss_weight == 0:
        return out
    classes = length_classes(lengths, mask.sum(1), cfg.max_length_offset)  # (B,)
    return (*out, cfg.length_loss_weight * F.cross_entropy(length_logits.float(), classes))


def ctc_forward(model, batch, cfg: NATConfig):
    """CTC: in training, the loss as the engine's extra term, after a (N, 1) row of zeros per target token as
    the logits (the cross-entropy of one class is 0; N counts the tokens for the logged mean). In evaluation,
    the row positions' log-probabilities and their labels on the most likely alignment (``best_path``): the dev
    loss and accuracy are those of each position's label on that alignment."""
    src, mask, rows, lengths = batch
    logp, frames = ctc_logits(model, src, mask)  # (B, W, V), (B,)
    if model.training:
        n = int(lengths.sum())
        loss = ctc_loss(logp, frames, rows, lengths, cfg.blank_id)
        return logp.new_zeros(n, 1), torch.zeros(n, dtype=torch.long, device=rows.device), loss
    labels = best_path(logp, frames, rows, lengths, cfg.blank_id)  # (B, W)
    keep = labels != IGNORE
    return logp[keep], labels[keep]  # (M, V), (M,)


def warn_unaligned(train_x: list, cfg: NATConfig) -> None:
    """CTC: say how many training targets their row cannot align (they add no loss)."""
    src_len = torch.tensor([len(s) for s, _ in train_x])
    rows = ctc_row_lengths(src_len, cfg)
    bad = sum(int((~ctc_feasible(t[None], torch.tensor([len(t)]), rows[i:i + 1])).sum())
              for i, (_, t) in enumerate(train_x))
    if bad:
        print(f"warning: --nat-loss ctc: {bad} of {len(train_x)} training targets are longer than their row "
              f"({cfg.ctc_upsample:g} x the source) can align; they add no loss (raise --ctc-upsample)",
              file=sys.stderr, flush=True)


def make_task(name: str, cfg: NATConfig, subwords, train_pairs, dev_pairs, max_length: int, meta: dict,
              seed: int) -> Task:
    torch.manual_seed(seed)
    model = NATModel(cfg)
    train_x = [encode_row(subwords, s, t, max_length, cfg) for s, t in train_pairs if t.strip()]
    dropped = len(train_pairs) - len(train_x)
    if dropped:
        print(f"warning: {dropped} training pairs with an empty target dropped", file=sys.stderr)
    dev_x = [encode_row(subwords, s, t, max_length, cfg) for s, t in dev_pairs] if dev_pairs else None
    if cfg.nat_loss == "ctc":
        warn_unaligned(train_x, cfg)
    return Task(name, model, train_x, partial(collate, cfg=cfg), partial(forward, cfg=cfg), dev=dev_x, meta=meta,
                lengths=[max(len(s), len(t)) for s, t in train_x])


def nat_meta(args, note: dict | None) -> dict:
    ctc = getattr(args, "nat_loss", "mask-predict") == "ctc"  # one pass, the length from the alignment
    candidates = args.length_candidates if args.length == "classifier" and not ctc else 1
    return {"decoder": "nat", "teacher": note, "init": None if getattr(args, "init", None) is None else str(args.init),
            "nat_decoding": {"iterations": 1 if ctc else args.iterations, "length_candidates": candidates}}


def task_for(model, meta: dict, name: str) -> Task:
    cfg = model.config
    return Task(name, model, [None], partial(collate, cfg=cfg), partial(forward, cfg=cfg), meta=meta)


class NATTranslator(Translator):
    """A NAT run as a Python object: ``translate(texts, iterations=10, length_candidates=3)``.

    Defaults come from the run (``attnkit train translate --iterations --length-candidates``).
    ``generate`` returns ``mask_predict``'s ``NATOutput`` (``sequences`` in ``generate``'s layout).
    """

    decoding = "nat"

    def __init__(self, model: NATModel, subwords, meta: dict, *, dtype: DType | None = None, batch_size: int = 64):
        super().__init__(model, subwords, meta, dtype=dtype, batch_size=batch_size)
        d = meta.get("nat_decoding", {})
        self.ctc = model.config.nat_loss == "ctc"
        self.defaults = {"iterations": int(d.get("iterations", 10)),
                         "length_candidates": int(d.get("length_candidates",
                                                        3 if model.config.length == "classifier" else 1))}
        if self.ctc:
            self.defaults = {"iterations": 1, "length_candidates": 1, "blank_penalty": 0.0}

    def options(self, kwargs: dict) -> dict:
        wrong = sorted(set(kwargs) - set(NAT_OPTIONS))
        if wrong:
            raise ValueError(f"translate: {', '.join(wrong)} {'is an option' if len(wrong) == 1 else 'are options'} of "
                             "autoregressive decoding; this run is non-autoregressive (trained with --decoder nat): "
                             "use iterations= and length_candidates=")
        kw = {**self.defaults, "suppress_tokens": [UNK_ID], **kwargs}
        if not self.ctc and "blank_penalty" in kwargs:
            raise ValueError("translate: blank_penalty (--blank-penalty) is for runs trained with CTC (--nat-loss "
                             f"ctc); this run was trained with {self.model.config.nat_loss}")
        if self.ctc:
            for name in ("iterations", "length_candidates"):
                if kw[name] != 1:
                    raise ValueError(f"translate: {name} (--{name.replace('_', '-')}) must be 1 for this run, got "
                                     f"{kw[name]}: it was trained with CTC (--nat-loss ctc), which decodes in one pass "
                                     "and takes the length from the alignment")
        return kw

    def generate(self, input_ids, attention_mask=None, **kwargs) -> NATOutput:
        """``attnkit.generation.mask_predict`` on this model (its inference copy, ``decoder``), or for a CTC run
        ``attnkit.generation.ctc_nat.ctc_decode``."""
        kw = self.options(kwargs)
        if self.ctc:
            return ctc_decode(self.decoder, input_ids, attention_mask, suppress_tokens=kw["suppress_tokens"],
                              blank_penalty=kw["blank_penalty"])
        return mask_predict(self.decoder, input_ids, attention_mask, **kw)

    def describe(self, kwargs: dict) -> str:
        kw = self.options(kwargs)
        if self.ctc:
            pen = f", blank penalty {kw['blank_penalty']:g}" if kw["blank_penalty"] else ""
            return f"NAT CTC one pass (a row of {self.model.config.ctc_upsample:g} x the source{pen})"
        how = "one pass" if kw["iterations"] == 1 else f"mask-predict {kw['iterations']} iterations"
        return f"NAT {how}, {kw['length_candidates']} length candidate{'s' * (kw['length_candidates'] > 1)}"

    # -- attention -------------------------------------------------------------------------------
    # A NAT translation has no step that wrote each token, so its map is the decoder run once over the
    # translation itself, every position visible (as a Mask-Predict pass sees the tokens it keeps):
    # per layer and head, where each target position looks in the source. A CTC run's map is its own one
    # pass: each position of the row of mask tokens, labelled with what it wrote (a token or the blank).

    LECTURE = "cross-attention of the parallel decoder"

    def _attend(self, text: str, kwargs: dict) -> tuple[Alignment, Tensor, Tensor, Tensor]:
        """(the alignment, source ids (1, S), its mask (1, S), the translation's tokens (1, T), END not
        included: the decoder writes T positions and END follows)."""
        ids, mask = self._source(text)
        res = self.generate(ids, mask, **kwargs)
        n = int(res.lengths[0]) - 1  # the tokens before END
        tokens = res.sequences[:, 1:1 + n]  # (1, T)
        if self.ctc:  # the pass that wrote it: a row of upsample x S mask tokens
            tokens = torch.full((1, int(res.candidate_lengths[0, 0])), self.model.config.mask_id, dtype=torch.long)
        with torch.no_grad():
            out = self._lecture_pass(ids, mask, tokens)
        weights = torch.stack([a[0] for a in out.cross_attentions])  # L x (H, T, S) -> (L, H, T, S)
        written = tokens[0] if not self.ctc else self.model.output_logits(out.last_hidden_state[0]).argmax(-1)
        blank = self.model.config.blank_id if self.ctc else None
        pieces = [CTC_BLANK if i == blank else self._piece(i) for i in written.tolist()]
        al = Alignment([self._piece(i) for i in ids[0].tolist()], pieces, weights, self._row_text(res.sequences[0]))
        return al, ids, mask, tokens

    def _lecture_pass(self, ids: Tensor, mask: Tensor, rows: Tensor):
        """The parallel decoder once over the translation ``rows`` (1, T), its attention weights kept."""
        return self.model.decode_parallel(rows, self.model.encode(ids, mask), mask, output_attentions=True)


class NonAutoregressive(Decoding):
    def check_arguments(self, args) -> None:
        check_arguments(args)

    def subwords(self, args):
        return None if getattr(args, "init", None) is None else init_subwords(args.init)

    def build(self, name, args, fields, subwords, train, dev, meta, seed) -> Task:
        """The teacher's translations as targets (or the corpus's own), Mask-Predict training; --init's weights
        unless the run resumes (then its own checkpoint's)."""
        tgt, note = targets(args, train, Path(args.out))
        cfg = config(args, fields)
        meta = {"model": cfg.to_dict(), **meta, **nat_meta(args, note)}
        dev_pairs = list(zip(dev.src, dev.tgt)) if dev else None
        task = make_task(name, cfg, subwords, list(zip(train.src, tgt)), dev_pairs, args.max_length, meta, seed)
        if getattr(args, "init", None) is not None and not getattr(args, "resume", False):
            initialise(task.model, args.init)
        return task

    def task_for(self, model, meta: dict, name: str) -> Task:
        return task_for(model, meta, name)


NAT = NonAutoregressive("nat", NATModel, NATConfig, NATTranslator)
