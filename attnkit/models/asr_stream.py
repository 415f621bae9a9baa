"""A streaming speech recogniser's encoder run on chunks, as the sound comes in, with CTC labels emitted per chunk.

A ``streaming`` ``AsrModel`` is causal everywhere: its convolutions see only earlier frames, encoder step i only
steps i - left .. i (``window=(left, 0)``), and its features are normalised by fixed statistics. So the CTC head's
output for steps s0 .. e-1 needs only the frames up to subsample x (e - 1) and a history of ``layers * left +
kernel`` steps before s0, ``layers`` the ones below the CTC head (each reaches ``left`` steps further back, the
convolutions a few more); only those layers run; positions are rotary (relative), so where the history starts does
not matter. ``stream_ctc`` runs the encoder on each chunk of ``chunk_steps`` new steps over that history only
(time and memory per chunk stay constant however long the sound) and gives the same CTC log-probabilities as the
whole utterance at once, to float rounding.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import torch
from torch import Tensor

from .asr import AsrModel

__all__ = ["Chunk", "stream_ctc", "history_steps"]


class Chunk(NamedTuple):
    first: int  # first encoder step of the chunk
    last_frame: int  # the last input frame it needs (its output exists once that frame does)
    log_probs: Tensor  # (steps, NUM_CLASSES) CTC log-probabilities of its steps
    seconds: float  # compute time of the chunk


def history_steps(model: AsrModel) -> int:
    """Steps before a chunk that its outputs depend on."""
    return model.config.ctc_layers * model.config.window[0] + model.config.kernel


@torch.no_grad()
def stream_ctc(model: AsrModel, frames: Tensor, chunk_steps: int) -> list[Chunk]:
    """frames (T, n_mels) of one utterance -> its chunks of ``chunk_steps`` encoder steps, in order."""
    if not model.config.streaming:
        raise ValueError("stream_ctc: the model is not a streaming model (train with --streaming)")
    if frames.dim() != 2 or frames.shape[0] == 0:
        raise ValueError(f"stream_ctc: `frames` must be (T, n_mels) with T > 0, got {tuple(frames.shape)}")
    if not isinstance(chunk_steps, int) or chunk_steps < 1:
        raise ValueError(f"stream_ctc: `chunk_steps` must be an integer >= 1, got {chunk_steps!r}")
    sub, total = model.subsample, int(model.out_lengths(torch.tensor(frames.shape[0])))
    history, out = history_steps(model), []
    for s0 in range(0, total, chunk_steps):
        t0 = time.perf_counter()
        e = min(total, s0 + chunk_steps)
        a = max(0, s0 - history)
        f0, f1 = sub * a, min(frames.shape[0], sub * (e - 1) + 1)  # step i reads frames <= sub * i
        enc = model.encode_frames(frames[None, f0:f1], torch.tensor([f1 - f0]), ctc_only=True)
        lp = enc.ctc_log_probs[0, s0 - a:e - a]
        out.append(Chunk(s0, f1 - 1, lp, time.perf_counter() - t0))
    return out
