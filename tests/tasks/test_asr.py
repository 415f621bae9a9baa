"""Speech recognition glue: the digit error count, long recordings cut at pauses, the Transcriber's decoding
modes, and streaming transcription with its latency bookkeeping, on tiny random models."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torch

from attnkit.data.audio import FeatureConfig, log_mel
from attnkit.data.digits import Utterance
from attnkit.generation.ctc import ctc_greedy
from attnkit.tasks.asr_stream import latency_lines, stream_transcribe
from attnkit.tasks.transcriber import PIECE_SECONDS, Transcriber, digit_errors, split_long
from tests.models.test_asr import tiny_asr

pytestmark = pytest.mark.usefixtures("one_thread")


def brute_edits(ref, hyp) -> int:
    """The fewest edits, by trying every alignment (tiny inputs only)."""
    if not ref or not hyp:
        return len(ref) + len(hyp)
    return min(brute_edits(ref[1:], hyp[1:]) + (ref[0] != hyp[0]), brute_edits(ref[1:], hyp) + 1,
               brute_edits(ref, hyp[1:]) + 1)


def test_digit_errors_count_a_minimum_edit():
    assert digit_errors([7, 0, 9, 1], [7, 0, 9, 1]) == (0, 0, 0)
    assert digit_errors([7, 0, 9, 1], [7, 9, 1]) == (0, 1, 0)
    assert digit_errors([7, 0], [7, 0, 0, 3]) == (0, 0, 2)
    assert digit_errors([1, 2, 3], [1, 5, 3]) == (1, 0, 0)
    assert digit_errors([], [4]) == (0, 0, 1) and digit_errors([4, 4], []) == (0, 2, 0)
    for ref, hyp in itertools.product(itertools.product(range(3), repeat=3), itertools.product(range(3), repeat=2)):
        s, d, i = digit_errors(list(ref), list(hyp))
        assert s + d + i == brute_edits(list(ref), list(hyp)) and len(ref) - d + i == len(hyp)


def test_long_recordings_are_cut_in_their_pauses():
    rate = 8000
    t = np.arange(rate) / rate
    word = 0.5 * np.sin(2 * np.pi * 400 * t[: rate // 2])  # 0.5 s of tone, then 0.3 s of silence
    x = np.concatenate([np.concatenate([word, np.zeros(int(0.3 * rate))]) for _ in range(30)])  # 24 s
    pieces = split_long(x, rate, 8.0)
    assert sum(len(p) for p in pieces) == len(x) and np.array_equal(np.concatenate(pieces), x)
    assert all(len(p) <= 8 * rate for p in pieces) and len(pieces) == 4
    for p in pieces[:-1]:  # every cut falls in a silence
        assert np.abs(p[-200:]).max() == 0.0
    assert split_long(x[:rate], rate, 8.0)[0] is not None and len(split_long(x[:rate], rate, 8.0)) == 1


def test_pieces_are_at_most_piece_seconds_even_after_longer_training_utterances():
    meta = {"features": FeatureConfig(n_mels=8).to_dict()}
    assert Transcriber(tiny_asr(5), {**meta, "max_seconds": 9.29}).max_seconds == PIECE_SECONDS == 8.0
    assert Transcriber(tiny_asr(5), {**meta, "max_seconds": 2.0}).max_seconds == 2.0
    assert Transcriber(tiny_asr(5), meta).max_seconds == 8.0


@pytest.fixture
def transcriber():
    return Transcriber(tiny_asr(5), {"features": FeatureConfig(n_mels=8).to_dict(), "max_seconds": 2.0},
                       batch_size=3)


def test_decoding_modes(transcriber):
    g = np.random.default_rng(0)
    audio = [(0.1 * g.standard_normal(n)).astype(np.float32) for n in (3000, 9000, 5000, 12000)]
    frames = [log_mel(x, transcriber.features) for x in audio]
    ctc = transcriber.decode(frames, ctc=True)
    for f, got in zip(frames, ctc):  # CTC one pass is every frame's best class, collapsed
        enc = transcriber.model.encode_frames(f[None], torch.tensor([f.shape[0]]))
        assert got == [c - 1 for c in ctc_greedy(enc.ctc_log_probs)[0]]
    greedy = transcriber.decode(frames, beam=1, ctc_weight=0.0)
    assert greedy == [transcriber.decode([f], beam=1, ctc_weight=0.0)[0] for f in frames]  # batching changes nothing
    joint = transcriber.decode(frames, beam=3, ctc_weight=0.5)
    assert all(all(0 <= d <= 9 for d in row) for row in joint)
    with pytest.raises(ValueError, match="`beam` must be an integer >= 1"):
        transcriber.decode(frames, beam=0)
    with pytest.raises(ValueError, match="`ctc_weight` must be in \\[0, 1\\]"):
        transcriber.decode(frames, ctc_weight=1.5)
    # a recording past max_seconds (2 s) is cut in pieces, each decoded, the digits joined
    long = np.concatenate([audio[3], audio[1]])  # 2.6 s
    pieces = split_long(long, 8000, 2.0)
    want = " ".join(str(d) for row in transcriber.decode([log_mel(p, transcriber.features) for p in pieces],
                                                         ctc=True) for d in row)
    assert len(pieces) == 2 and transcriber.transcribe_array(long, 8000, ctc=True) == want
    assert transcriber.transcribe_array(np.stack([long, long], 1), 8000, ctc=True) == want  # channels averaged
    with pytest.raises(ValueError, match="non-empty"):
        transcriber.transcribe_array(np.zeros(0), 8000)
    with pytest.raises(ValueError, match="`rate` must be a positive integer"):
        transcriber.transcribe_array(long, 0)


def test_streaming_transcripts_and_latency():
    model = tiny_asr(6, streaming=True, window=(3, 0), kernel=3)
    feats = FeatureConfig(n_mels=8, normalize=False)
    x = (0.1 * np.random.default_rng(1).standard_normal(8000)).astype(np.float32)
    r = stream_transcribe(model, feats, x, 2)
    enc = model.encode_frames(log_mel(x, feats)[None], torch.tensor([101]))
    assert r.digits == [c - 1 for c in ctc_greedy(enc.ctc_log_probs)[0]]  # the same labels as all at once
    assert len(r.emitted) == len(r.digits) and r.emitted == sorted(r.emitted) and len(r.chunk_seconds) == 13
    # a label comes out when its chunk has run: once the chunk's last frame (4 (2k + 1) for chunk k) exists,
    # i.e. the sound reaches its centre (hop 80 samples) + half an FFT (128 samples), plus the compute time
    ready = [(80 * min(100, 4 * (2 * k + 1)) + 128) / 8000 + r.chunk_seconds[k] for k in range(13)]
    assert all(min(abs(t - c) for c in ready) < 1e-9 for t in r.emitted)
    if not r.digits:
        pytest.skip("the random model wrote no digit")
    u = Utterance(x, tuple(r.digits), "alice", ("x",) * len(r.digits), tuple((0, 4000) for _ in r.digits))
    (line,) = latency_lines(model, feats, [u], 2)  # every digit "ends" at 0.5 s
    median = 1000 * float(np.median([t - 0.5 for t in r.emitted]))
    got = re.search(r"1/1 utterances right; latency from the end of a digit to its label: median (-?\d+) ms", line)
    assert got and abs(int(got[1]) - median) < 30, line  # (the compute times of a second run differ a little)
