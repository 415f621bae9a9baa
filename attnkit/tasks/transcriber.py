"""``Transcriber``: a trained speech recognition run as a Python object (``attnkit.load_pretrained(RUN)``).

    tr = attnkit.load_pretrained("runs/asr")
    tr.transcribe(["a.wav", "b.wav"])            # ['7 0 9 1', '3']
    tr.transcribe(["a.wav"], ctc=True)           # CTC one pass: every frame labelled at once, collapsed
    tr.transcribe(["a.wav"], beam=1, ctc_weight=0)  # greedy attention decoding
    tr.transcribe_array(samples, 16000)          # any rate: resampled to the model's
    tr.transcribe(["a.wav"], as_is=True)         # the recording as it is: silences and level kept

Before decoding, a recording is mixed down to one channel and resampled to the model's rate (``soxr``, band-limited);
unless ``as_is``, its leading and trailing silence is trimmed to 0.25 s, its pauses longer than 0.4 s are shortened to
0.4 s and its level is set to its training utterances' median speech power (``attnkit.data.silence``; runs saved
before the level was recorded keep theirs): a microphone's recording made to look like a training utterance.
``evaluate`` scores its sets as they are.

Decoding (``decode``): the encoder runs once per batch of utterances (on the inference engine,
``attnkit.inference.AsrEngine``); then CTC one pass, or the attention decoder through ``attnkit.generation``
(greedy, beam search), or its beam search with every step also scored by CTC's prefix probability
(``ctc_weight`` > 0; ``attnkit.generation.ctc``). A recording longer than the longest training utterance
(``meta["max_seconds"]``) or than ``PIECE_SECONDS`` is cut at its quietest moments into pieces no longer than
that, each decoded, the digits joined.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..data.audio import FeatureConfig, log_mel, resample
from ..data.silence import set_level, trim_silence
from ..data.sound import read_audio
from ..generation import beam_search, greedy_or_sample
from ..generation.ctc import ctc_beam_search, ctc_greedy
from ..generation.protocol import TokenIds
from ..inference import engine_for
from ..models.asr import BOS, EOS, FIRST_DIGIT, PAD, label_of_tokens, token_digits
from ..train.metrics import floor
from ..train.progress import counter, ticker

__all__ = ["Transcriber", "AsrAlignment", "digit_errors", "score_set", "score_lines", "lines_of", "split_long"]

MODES = ("ctc", "greedy", "beam", "joint")


@dataclass
class AsrAlignment:
    frames: Tensor  # (T, n_mels) log-mel frames
    tokens: list[int]  # the t generated tokens (END last, unless the length limit came first)
    weights: Tensor  # (layers, heads, t, T') cross-attention of each generated token
    step_frames: int  # input frames per encoder step

    @property
    def digits(self) -> list[int]:
        return token_digits(self.tokens)

    @property
    def labels(self) -> list[str]:
        """Each generated token as text: its digit, or END."""
        return [str(t - FIRST_DIGIT) if t >= FIRST_DIGIT else "END" for t in self.tokens]


# The longest piece decoded at once, whatever the longest training utterance: the beam's CTC prefix scores cost
# a piece's frames times its digits, so one long piece costs more than two short ones (timings: docs/asr.md).
PIECE_SECONDS = 8.0


def split_long(x: np.ndarray, rate: int, max_seconds: float) -> list[np.ndarray]:
    """Samples (S,) -> pieces of at most ``max_seconds``, each cut in the middle of the quietest 100 ms of the
    second half of the span that is left (the latest, of equally quiet ones)."""
    limit = max(int(max_seconds * rate), rate // 2)
    hop, win = max(1, rate // 100), max(1, rate // 10)
    out, start = [], 0
    while len(x) - start > limit:
        seg = x[start:start + limit].astype(np.float64)
        total = np.concatenate(([0.0], np.cumsum(seg ** 2)))  # running sums: linear time whatever the rate
        energy = (total[win:] - total[:-win])[::hop]  # 100 ms windows every 10 ms (exactly 0 where silent)
        late = energy[len(energy) // 2:][::-1]  # the second half, latest first: of equal minima, the last
        cut = start + (len(energy) - 1 - int(np.argmin(late))) * hop + win // 2
        out.append(x[start:cut])
        start = cut
    out.append(x[start:])
    return out


class Transcriber:
    """An ``AsrModel`` (eval mode) + the run's feature settings and default decoding."""

    def __init__(self, model, meta: dict, *, batch_size: int = 32):
        self.model, self.meta, self.batch_size = model.eval(), meta, batch_size
        self.encoder = engine_for(self.model)  # its encoder and CTC head on the inference engine (or the model)
        self.features = FeatureConfig(**meta["features"])
        self.rate = self.features.sample_rate
        d = meta.get("decoding", {})
        self.beam, self.ctc_weight = int(d.get("beam", 5)), float(d.get("ctc_weight", 0.3))
        self.max_seconds = min(float(meta.get("max_seconds", PIECE_SECONDS)), PIECE_SECONDS)
        self.level_db = meta.get("level_db")  # the training utterances' median speech power, dB (None: not recorded)
        self.ids = TokenIds(pad=PAD, eos=EOS, start=BOS)

    # -- audio in, text out ------------------------------------------------------------------------
    def transcribe(self, paths: Sequence[str] | str, *, as_is: bool = False, **decoding) -> list[str]:
        """WAV files (any rate, channels averaged) -> one transcript each, digits separated by spaces."""
        paths = [paths] if isinstance(paths, str) else list(paths)
        return self.transcribe_arrays([read_audio(p, self.rate) for p in paths], as_is=as_is, **decoding)

    def transcribe_array(self, samples, rate: int, *, as_is: bool = False, **decoding) -> str:
        """Samples (S,) (or (S, channels)) at ``rate`` Hz -> the transcript."""
        return self.transcribe_arrays([self.at_rate(samples, rate)], as_is=as_is, **decoding)[0]

    def at_rate(self, samples, rate: int) -> np.ndarray:
        """Samples (S,) (or (S, channels), averaged) at ``rate`` Hz -> (S',) at the model's rate."""
        x = np.asarray(samples, dtype=np.float32)
        if x.ndim == 2:
            x = x.mean(axis=1)
        if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
            raise ValueError(f"transcribe_array: `samples` must be a non-empty (S,) or (S, channels) array of finite "
                             f"numbers, got shape {x.shape}")
        if not isinstance(rate, int) or rate <= 0:
            raise ValueError(f"transcribe_array: `rate` must be a positive integer (Hz), got {rate!r}")
        return resample(x, rate, self.rate)

    def clean(self, x: np.ndarray) -> np.ndarray:
        """Samples (S,) at the model's rate -> silences trimmed, long pauses shortened, the training level."""
        x = trim_silence(x, self.rate)
        return x if self.level_db is None else set_level(x, self.rate, self.level_db)

    def prepare(self, x: np.ndarray, *, as_is: bool = False) -> list[np.ndarray]:
        """Samples (S,) at the model's rate -> the pieces decoded: ``clean`` unless ``as_is``, then cut at quiet
        moments into pieces of at most ``max_seconds``."""
        return split_long(x if as_is else self.clean(x), self.rate, self.max_seconds)

    def transcribe_arrays(self, samples: list[np.ndarray], *, as_is: bool = False, progress=False,
                          **decoding) -> list[str]:
        """Samples at the model's rate, (S,) each -> one transcript each. ``progress``: the recordings prepared and
        then the pieces decoded counted on a bar (True), in plain lines at least every 10 s of a long call (None: on
        stdout; a function: given to it) or not at all (False; ``attnkit.train.progress.counter``)."""
        tick = counter("transcribe: preparing", len(samples), "recordings", progress)
        pieces, flat = [], []
        for x in samples:
            pieces.append(self.prepare(x, as_is=as_is))
            flat += [log_mel(p, self.features) for p in pieces[-1]]
            tick.update()
        tick.close()
        how = self.decoding(**{k: decoding[k] for k in ("ctc", "beam", "ctc_weight") if k in decoding})
        unit = "recordings" if len(flat) == len(samples) else "pieces (long recordings cut at quiet moments)"
        tick = counter(f"transcribe: decoding, {how}", len(flat), unit, progress)
        try:
            digits = self.decode(flat, progress=tick.update, **decoding)
        finally:
            tick.close()
        out, k = [], 0
        for ps in pieces:
            out.append(" ".join(str(d) for row in digits[k:k + len(ps)] for d in row))
            k += len(ps)
        return out

    # -- decoding ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode(self, frames: list[Tensor], *, ctc: bool = False, beam: int | None = None,
               ctc_weight: float | None = None, length_penalty: float = 1.0,
               progress: Callable[[int], object] | None = None) -> list[list[int]]:
        """Log-mel frames of each utterance -> its digits. ``ctc``: CTC one pass; else beam ``beam`` (1 = greedy)
        with CTC weight ``ctc_weight`` (defaults: the run's). ``progress(n)`` after each batch of n utterances."""
        beam = self.beam if beam is None else beam
        w = self.ctc_weight if ctc_weight is None else ctc_weight
        if not isinstance(beam, int) or isinstance(beam, bool) or beam < 1:
            raise ValueError(f"transcribe: `beam` must be an integer >= 1, got {beam!r}")
        if not 0 <= w <= 1:
            raise ValueError(f"transcribe: `ctc_weight` must be in [0, 1], got {w!r}")
        order = sorted(range(len(frames)), key=lambda i: frames[i].shape[0])
        out: list[list[int]] = [[] for _ in frames]
        for s in range(0, len(order), self.batch_size):
            chunk = order[s:s + self.batch_size]
            for i, row in zip(chunk, self._decode_batch([frames[i] for i in chunk], ctc, beam, w, length_penalty)):
                out[i] = row
            if progress is not None:
                progress(len(chunk))
        return out

    def _decode_batch(self, frames: list[Tensor], ctc: bool, beam: int, w: float, lp: float) -> list[list[int]]:
        lengths = torch.tensor([f.shape[0] for f in frames])
        enc = self.encoder.encode_frames(torch.nn.utils.rnn.pad_sequence(frames, batch_first=True), lengths,
                                          ctc_only=ctc)
        if ctc:
            return [[c - 1 for c in row] for row in ctc_greedy(enc.ctc_log_probs, enc.lengths)]
        mask = None if bool(enc.mask.all()) else enc.mask
        n = min(self.model.config.max_positions - 1, int(enc.lengths.max()) + 1)
        common = dict(max_new_tokens=n, suppress=torch.tensor([PAD, BOS]))
        if w > 0:
            hyp = ctc_beam_search(self.model, enc.memory, mask, enc.ctc_log_probs, enc.lengths, self.ids,
                                  label_of=label_of_tokens(), num_beams=beam, ctc_weight=w, **common)
        elif beam > 1:
            hyp = beam_search(self.model, enc.memory, mask, self.ids, num_beams=beam, min_new_tokens=0,
                              use_cache=True, output_attentions=False, length_penalty=lp, early_stopping=False,
                              **common)
        else:
            hyp = greedy_or_sample(self.model, enc.memory, mask, self.ids, min_new_tokens=0, use_cache=True,
                                   output_attentions=False, length_penalty=lp, **common)
        limits = (enc.lengths + 1).clamp(max=self.model.config.max_positions - 1)  # no more tokens than steps + 1
        return [token_digits(row[:min(int(n), int(k))].tolist()) for row, n, k in zip(hyp.tokens, hyp.lengths, limits)]

    # -- what the decoder looked at -------------------------------------------------------------
    def decoding(self, *, ctc: bool = False, beam: int | None = None, ctc_weight: float | None = None) -> str:
        """The decoding ``decode`` runs with these arguments, in words: "beam 5 + CTC 0.5", "greedy", ..."""
        beam = self.beam if beam is None else beam
        w = self.ctc_weight if ctc_weight is None else ctc_weight
        return describe("ctc" if ctc else "joint" if w > 0 else "beam" if beam > 1 else "greedy", beam, w)

    @torch.no_grad()
    def attend(self, samples: np.ndarray, digits: Sequence[int] | None = None, *, as_is: bool = False
               ) -> AsrAlignment:
        """One recording (at the model's rate) with the decoder's cross-attention of each token: of ``digits``
        (the transcript a decoding printed, END after it) read by the decoder, or without them of greedy
        decoding's own tokens. A recording longer than a piece (``max_seconds``) shows its first piece, as
        decoding cuts it: the figures and pages stay bounded (an hour's cross-attention would take GBs, and no
        page could show it)."""
        f = log_mel(self.prepare(np.asarray(samples, dtype=np.float32), as_is=as_is)[0], self.features)
        enc = self.model.encode_frames(f[None], torch.tensor([f.shape[0]]))
        if digits is not None:
            tokens = ([FIRST_DIGIT + int(d) for d in digits] + [EOS])[:self.model.config.max_positions - 1]
            out = self.model.decode(torch.tensor([[BOS, *tokens[:-1]]]), enc.memory, output_attentions=True)
            weights = torch.stack(out.cross_attentions)[:, 0]  # per layer (1, H, t, S) -> (L, H, t, S)
            return AsrAlignment(f, tokens, weights, self.model.subsample)
        n = min(self.model.config.max_positions - 1, int(enc.lengths[0]) + 1)
        hyp = greedy_or_sample(self.model, enc.memory, None, self.ids, max_new_tokens=n, min_new_tokens=0,
                               suppress=torch.tensor([PAD, BOS]), use_cache=True, output_attentions=True,
                               length_penalty=1.0)
        t = int(hyp.lengths[0])
        weights = hyp.cross_attentions[0, :t].permute(1, 2, 0, 3)  # (t, L, H, S) -> (L, H, t, S)
        return AsrAlignment(f, hyp.tokens[0, :t].tolist(), weights, self.model.subsample)

    def lecture(self, samples: np.ndarray, path, title: str = "", digits: Sequence[int] | None = None, *,
                as_is: bool = False):
        """The lecture page of the decoder's cross-attention for one recording: per layer and head, q of each
        generated token (of ``digits`` when given, as ``attend``), k and v of every encoder step
        (``attnkit.viz.model_lecture_html``)."""
        from ..viz.lecture import model_lecture_html

        al = self.attend(samples, digits, as_is=as_is)
        rows = torch.tensor([[BOS, *al.tokens[:-1]]])  # the decoder's input at each step
        with torch.no_grad():
            enc = self.model.encode_frames(al.frames[None], torch.tensor([al.frames.shape[0]]))
            keys = [f"{0.01 * al.step_frames * j:.2f}s" for j in range(enc.memory.shape[1])]
            page = model_lecture_html(self.model, lambda: self.model.decode(rows, enc.memory), al.labels, path,
                                      keys=keys, title=title or "cross-attention over the sound, step by step")
        return page, al


def digit_errors(ref: Sequence[int], hyp: Sequence[int]) -> tuple[int, int, int]:
    """(substitutions, deletions, insertions) of a minimum edit from ``ref`` to ``hyp`` (Levenshtein)."""
    prev = [(j, 0, 0, j) for j in range(len(hyp) + 1)]  # (cost, sub, del, ins)
    for i in range(1, len(ref) + 1):
        cur = [(i, 0, i, 0)]
        for j in range(1, len(hyp) + 1):
            c, s, d, n = prev[j - 1]
            best = (c, s, d, n) if ref[i - 1] == hyp[j - 1] else (c + 1, s + 1, d, n)
            c, s, d, n = prev[j]
            best = min(best, (c + 1, s, d + 1, n))
            c, s, d, n = cur[j - 1]
            best = min(best, (c + 1, s, d, n + 1))
            cur.append(best)
        prev = cur
    return prev[-1][1], prev[-1][2], prev[-1][3]


def describe(mode: str, beam: int, w: float) -> str:
    names = {"ctc": "CTC one pass", "greedy": "greedy", "beam": f"beam {beam}", "joint": f"beam {beam} + CTC {w:g}"}
    return names[mode]


def score_set(tr: Transcriber, name: str, audio: list[np.ndarray], refs: list[list[int]], *, beam: int,
              modes: Sequence[str] = MODES, ctc_weight: float | None = None, bars: bool | None = None) -> dict:
    """Each decoding mode's scores of one set: ``{"utterances", "digits", "modes": {mode: {"decoding", "der" (digit
    error rate, %: edits / reference digits), "sub", "del", "ins", "utterance_accuracy" (%), "seconds"}}}``.
    ``ctc_weight``: the joint mode's (default: the run's). While decoding: a bar or plain lines (``bars``)."""
    w = tr.ctc_weight if ctc_weight is None else ctc_weight
    frames = [log_mel(x, tr.features) for x in audio]
    n_digits = sum(len(r) for r in refs)
    out = {"utterances": len(refs), "digits": n_digits, "modes": {}}
    for mode in modes:
        kw = {"ctc": dict(ctc=True), "greedy": dict(beam=1, ctc_weight=0.0), "beam": dict(beam=beam, ctc_weight=0.0),
              "joint": dict(beam=beam, ctc_weight=w)}[mode]
        t0 = time.perf_counter()
        tick = ticker(f"{name}: decoding, {describe(mode, beam, w)}", len(frames), "utterances", bars=bars)
        hyps = tr.decode(frames, progress=tick.update, **kw)
        tick.close()
        errs = [digit_errors(r, h) for r, h in zip(refs, hyps)]
        s, d, i = (sum(e[k] for e in errs) for k in range(3))
        exact = sum(r == h for r, h in zip(refs, hyps))
        out["modes"][mode] = {"decoding": describe(mode, beam, w), "der": 100 * (s + d + i) / max(n_digits, 1),
                              "sub": s, "del": d, "ins": i,
                              "utterance_accuracy": 100 * exact / max(len(refs), 1),
                              "seconds": time.perf_counter() - t0}
    return out


def score_lines(tr: Transcriber, name: str, audio: list[np.ndarray], refs: list[list[int]], **kwargs) -> list[str]:
    """``score_set``'s numbers as lines: the set, then each decoding's digit error rate and utterance accuracy."""
    return lines_of(name, score_set(tr, name, audio, refs, **kwargs))


def lines_of(name: str, scores: dict) -> list[str]:
    """``score_set``'s result as the lines ``evaluate`` prints."""
    lines = [f"{name}: {scores['utterances']} utterances, {scores['digits']} digits"]
    for m in scores["modes"].values():
        lines.append(f"  {m['decoding']:<18} digit error rate {m['der']:.2f}% ({m['sub']} sub, {m['del']} del, "
                     f"{m['ins']} ins)  utterance accuracy {floor(m['utterance_accuracy'], 2)}%  "
                     f"({m['seconds']:.1f} s)")
    return lines
