"""Streaming transcription and its latency: how long after a digit ends its label comes out.

A streaming run's encoder runs on chunks of ``chunk_steps`` encoder steps (40 ms each, 80 at ``subsample`` 8) as
the sound comes in (``models.asr_stream.stream_ctc``); each chunk's CTC labels are collapsed with the previous
chunk's last one (a label repeated across a chunk border is one label). A chunk can run once its last frame
exists: the frame centred at ``hop * f`` is complete when the sound reaches ``hop * f + n_fft / 2`` samples. A
digit's latency is the time its label comes out (that moment plus the chunk's measured compute time) minus the end
of the digit's recording in the utterance (FSDD's recordings are trimmed close to the speech). Only utterances
whose streamed transcript is right count: there the k-th label is the k-th digit."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from ..data.audio import FeatureConfig, log_mel
from ..models.asr_stream import stream_ctc

__all__ = ["StreamResult", "stream_transcribe", "latency_lines"]


@dataclass
class StreamResult:
    digits: list[int]
    emitted: list[float]  # seconds from the start of the sound at which each digit's label came out
    chunk_seconds: list[float]  # compute time of each chunk


def stream_transcribe(model, features: FeatureConfig, samples, chunk_steps: int) -> StreamResult:
    """Transcribe one recording chunk by chunk (see the module doc)."""
    f = log_mel(samples, features)
    rate, hop, half = features.sample_rate, features.hop_length, features.fft_size // 2
    digits, emitted, prev = [], [], 0
    chunks = stream_ctc(model, f, chunk_steps)
    for c in chunks:
        ready = min(len(samples), hop * c.last_frame + half) / rate + c.seconds
        for label in c.log_probs.argmax(-1).tolist():
            if label != prev and label != 0:
                digits.append(label - 1)
                emitted.append(ready)
            prev = label
    return StreamResult(digits, emitted, [c.seconds for c in chunks])


@torch.no_grad()
def latency_lines(model, features: FeatureConfig, utterances, chunk_steps: int) -> list[str]:
    """Digit error counts and emission latency (median, 90th percentile) over ``utterances`` (with spans)."""
    rate = features.sample_rate
    lat, chunk_ms, right, n = [], [], 0, 0
    for u in utterances:
        r = stream_transcribe(model, features, u.samples, chunk_steps)
        chunk_ms += [1000 * s for s in r.chunk_seconds]
        n += 1
        if r.digits == list(u.digits):
            right += 1
            lat += [1000 * (t - end / rate) for t, (_, end) in zip(r.emitted, u.spans)]
    ms = chunk_steps * model.subsample * 1000 * features.hop_length // rate  # a chunk's span of sound
    if not lat:
        return [f"streaming CTC, chunks of {ms} ms: no utterance right, no latency to measure"]
    q = statistics.quantiles(lat, n=10) if len(lat) > 1 else lat  # (deciles need two digits)
    return [f"streaming CTC, chunks of {ms} ms: {right}/{n} utterances right; latency from the end "
            f"of a digit to its label: median {statistics.median(lat):.0f} ms, 10th percentile {q[0]:.0f} ms, "
            f"90th percentile {q[-1]:.0f} ms ({len(lat)} digits); compute per chunk: median "
            f"{statistics.median(chunk_ms):.1f} ms"]
