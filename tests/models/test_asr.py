"""The speech recognition model: its decoding protocol against teacher forcing and attnkit.generation's loops,
streaming chunks against the whole utterance, the front end's lengths, and its config checks."""

from __future__ import annotations

import pytest
import torch

from attnkit.generation import beam_search, greedy_or_sample
from attnkit.generation.protocol import TokenIds
from attnkit.models.asr import BOS, EOS, PAD, AsrConfig, AsrModel
from attnkit.models.asr_stream import stream_ctc
from attnkit.nn import TransformerConfig

pytestmark = pytest.mark.usefixtures("one_thread")
IDS = TokenIds(pad=PAD, eos=EOS, start=BOS)


def tiny_asr(seed: int = 0, **config) -> AsrModel:
    torch.manual_seed(seed)
    enc = TransformerConfig(d_model=32, num_heads=2, d_ff=64, num_encoder_layers=2, num_decoder_layers=0,
                            dropout=0.0, positional="rope", norm_first=True)
    dec = enc.replace(num_encoder_layers=0, num_decoder_layers=2, positional="sinusoidal", max_len=64)
    m = AsrModel(AsrConfig(**{"n_mels": 8, "window": (2, 2), "subsample": 4, "ctc_layer": 0, "encoder": enc,
                              "decoder": dec, **config})).eval()
    with torch.no_grad():
        m.feature_mean.normal_()
        m.feature_std.uniform_(0.5, 2.0)
    return m


def frames(n: int = 4, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([13 + 7 * i for i in range(n)])
    return torch.randn(n, int(lengths.max()), 8, generator=g), lengths


@pytest.mark.parametrize("frontend", ["conv1d", "conv2d"])
def test_front_end_lengths_and_padding_do_not_leak(frontend):
    m = tiny_asr(frontend=frontend, channels=4)
    x, lengths = frames()
    enc = m.encode_frames(x, lengths)
    assert enc.memory.shape == (4, 9, 32) and enc.lengths.tolist() == [4, 5, 7, 9]  # ceil(ceil(T / 2) / 2)
    assert enc.ctc_log_probs.shape == (4, 9, 11)
    torch.testing.assert_close(enc.ctc_log_probs.exp().sum(-1), torch.ones(4, 9))
    one = m.encode_frames(x[:1, :13], lengths[:1])  # the same utterance alone: padding never reaches it
    torch.testing.assert_close(one.memory, enc.memory[:1, :4], atol=1e-5, rtol=1e-5)
    x2 = x.clone()
    x2[0, 13:] = 100.0  # other padding values change nothing either
    torch.testing.assert_close(m.encode_frames(x2, lengths).memory[0, :4], enc.memory[0, :4])


@pytest.mark.parametrize("frontend", ["conv1d", "conv2d"])
def test_subsample_8_runs_three_convolutions_and_halves_the_steps(frontend):
    m = tiny_asr(frontend=frontend, channels=4, subsample=8)
    x, lengths = frames()  # 13, 20, 27, 34 frames
    enc = m.encode_frames(x, lengths)
    assert enc.lengths.tolist() == [2, 3, 4, 5] and enc.memory.shape == (4, 5, 32)  # ceil thrice
    assert [n for n, _ in m.frontend.named_children()][:3] == ["conv1", "conv2", "conv3"]
    one = m.encode_frames(x[1:2, :20], lengths[1:2])  # padding never reaches a real step
    torch.testing.assert_close(one.memory, enc.memory[1:2, :3], atol=1e-5, rtol=1e-5)
    four = tiny_asr(frontend=frontend, channels=4)
    assert "conv3" not in dict(four.frontend.named_children())  # runs saved before subsample 8 load as they were
    assert set(four.state_dict()) < set(m.state_dict())


def test_ctc_at_an_inner_layer_reads_that_layer_and_its_one_pass_runs_only_there():
    m = tiny_asr(4, ctc_layer=1)
    x, lengths = frames()
    enc = m.encode_frames(x, lengths)
    with torch.no_grad():
        h, steps = m.front(x, lengths)
        below = m.encoder.layers[0](m.encoder.position(h) if m.encoder.position else h, m.encoder_mask(steps))[0]
        want = m.ctc_head(m.ctc_norm(below)).log_softmax(-1)
    torch.testing.assert_close(enc.ctc_log_probs, want, atol=1e-5, rtol=1e-5)
    whole = m.encoder(h, m.encoder_mask(steps)).last_hidden_state  # the decoder still reads every layer
    torch.testing.assert_close(enc.memory, m.memory_position(whole), atol=1e-6, rtol=1e-6)
    calls = []
    hook = m.encoder.layers[1].register_forward_hook(lambda *a: calls.append(1))
    only = m.encode_frames(x, lengths, ctc_only=True)
    hook.remove()
    assert not calls and only.memory is None  # the early exit: layer 2 never ran
    torch.testing.assert_close(only.ctc_log_probs, enc.ctc_log_probs)
    assert m.config.ctc_layers == 1 and tiny_asr().config.ctc_layers == 2 and tiny_asr().ctc_norm is None
    assert tiny_asr(ctc_layer=-1).config.ctc_layers == 1 and AsrConfig().ctc_layers == 3  # the middle: ceil(n / 2)
    old = {k: v for k, v in AsrConfig().to_dict().items() if k not in ("subsample", "ctc_layer", "frontend")}
    assert AsrConfig.from_dict(old).replace(encoder=AsrConfig().encoder) == AsrConfig(subsample=4, ctc_layer=0,
                                                                                      frontend="conv1d")
    assert AsrConfig().frontend == "conv2d"  # the default since 2026-11-29; runs saved before keep theirs


def test_decode_step_with_and_without_cache_equals_teacher_forcing():
    m = tiny_asr()
    x, lengths = frames()
    tokens = torch.tensor([[BOS, 5, 7, 7, 3]] * 4)
    enc = m.encode_frames(x, lengths)
    full = m.logits(m.decode(tokens, enc.memory, enc.mask).last_hidden_state)  # (4, 5, V)
    cache = None
    for t in range(tokens.shape[1]):
        step = m.decode_step(tokens[:, t:t + 1], enc.memory, enc.mask, cache)
        cache = step.cache
        torch.testing.assert_close(step.logits, full[:, t], atol=1e-5, rtol=1e-5)
        uncached = m.decode_step(tokens[:, :t + 1], enc.memory, enc.mask, use_cache=False)
        torch.testing.assert_close(uncached.logits, full[:, t], atol=1e-5, rtol=1e-5)
    logits, _, who = m(x, lengths, tokens)
    assert who is None  # no adversary asked for
    torch.testing.assert_close(logits, full)
    moved = m.reorder_cache(cache, torch.tensor([2, 2, 0, 1]))
    assert torch.equal(moved[0].self_kv.k[0], cache[0].self_kv.k[2])


@torch.no_grad()
def test_greedy_and_beam_through_generation_follow_the_model():
    m = tiny_asr(3)
    x, lengths = frames()
    enc = m.encode_frames(x, lengths)
    kw = dict(max_new_tokens=6, min_new_tokens=0, suppress=torch.tensor([PAD, BOS]), use_cache=True,
              output_attentions=False, length_penalty=1.0)
    greedy = greedy_or_sample(m, enc.memory, enc.mask, IDS, **kw)
    for b in range(4):  # the same tokens as argmax, one step at a time, each utterance alone
        seq = [BOS]
        mem = enc.memory[b:b + 1, :int(enc.lengths[b])]
        while len(seq) <= 6 and (len(seq) == 1 or seq[-1] != EOS):
            logits = m.decode_step(torch.tensor([seq]), mem, None, use_cache=False).logits[0]
            logits[[PAD, BOS]] = float("-inf")
            seq.append(int(logits.argmax()))
        n = int(greedy.lengths[b])
        assert greedy.tokens[b, :n].tolist() == seq[1:]
    beam = beam_search(m, enc.memory, enc.mask, IDS, num_beams=4, early_stopping=False, **kw)
    for b in range(4):  # beam search's choice scores at least as high as greedy's under the model
        n = int(beam.lengths[b])
        tf = m(x[b:b + 1], lengths[b:b + 1], torch.tensor([[BOS, *beam.tokens[b, :n - 1].tolist()]]))[0]
        lp = tf.log_softmax(-1)[0].gather(1, beam.tokens[b, :n, None]).sum()
        assert float(lp) == pytest.approx(float(beam.log_probs[b]), abs=1e-4)
        assert float(beam.scores[b]) >= float(greedy.scores[b]) - 1e-5


@pytest.mark.parametrize("chunk,frontend,sub,ctc", [(1, "conv1d", 4, 0), (3, "conv2d", 4, 0), (8, "conv1d", 4, 0),
                                                    (100, "conv2d", 4, 0), (2, "conv1d", 8, 1), (5, "conv2d", 8, 0)])
def test_streaming_chunks_equal_the_whole_utterance(chunk, frontend, sub, ctc):
    m = tiny_asr(1, streaming=True, window=(3, 0), kernel=3, frontend=frontend, channels=4, subsample=sub,
                 ctc_layer=ctc)
    x = torch.randn(203, 8)
    whole = m.encode_frames(x[None], torch.tensor([203])).ctc_log_probs[0]
    chunks = stream_ctc(m, x, chunk)
    got = torch.cat([c.log_probs for c in chunks])
    steps = {4: 51, 8: 26}[sub]
    assert got.shape == whole.shape == (steps, 11)
    torch.testing.assert_close(got, whole, atol=1e-5, rtol=1e-5)
    assert [c.first for c in chunks] == list(range(0, steps, chunk))
    assert chunks[0].last_frame == sub * (min(chunk, steps) - 1)  # step i needs the frames up to sub * i only
    # a causal model: the future does not change the past
    late = x.clone()
    late[120:] = 0.0
    early = m.encode_frames(late[None], torch.tensor([203])).ctc_log_probs[0]
    torch.testing.assert_close(early[:120 // sub], whole[:120 // sub], atol=1e-5, rtol=1e-5)  # frames < 120


def test_config_is_checked():
    with pytest.raises(ValueError, match="`streaming` needs a window with no right context"):
        AsrConfig(streaming=True, window=(8, 2))
    with pytest.raises(ValueError, match="`streaming` needs a window"):
        AsrConfig(streaming=True, window=None)
    with pytest.raises(ValueError, match="`ctc_weight` must be a number in \\[0, 1\\]"):
        AsrConfig(ctc_weight=1.5)
    with pytest.raises(ValueError, match="`frontend` must be 'conv1d' or 'conv2d'"):
        AsrConfig(frontend="lstm")
    with pytest.raises(ValueError, match="`window` must be \\(left, right\\)"):
        AsrConfig(window=(3, -1))
    with pytest.raises(ValueError, match="`subsample` must be one of \\(4, 8\\)"):
        AsrConfig(subsample=6)
    with pytest.raises(ValueError, match="`subsample` must be an integer in \\[4, 8\\]"):
        AsrConfig(subsample=2)
    with pytest.raises(ValueError, match="`ctc_layer` must be at most the encoder's 6 layers"):
        AsrConfig(ctc_layer=7)
    enc = AsrConfig().encoder
    with pytest.raises(ValueError, match="d_model \\(96\\) and the decoder's \\(144\\)"):
        AsrConfig(decoder=AsrConfig().decoder.replace(d_model=144, num_heads=4))
    with pytest.raises(ValueError, match="positions that only see distances"):
        AsrConfig(streaming=True, window=(4, 0), encoder=enc.replace(positional="sinusoidal"))
    cfg = AsrConfig(window=(4, 0), streaming=True)
    assert AsrConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown keys \\['colour'\\]"):
        AsrConfig.from_dict({**cfg.to_dict(), "colour": 1})
    with pytest.raises(ValueError, match="`frames` must have shape \\(B, T, 8\\)"):
        tiny_asr().encode_frames(torch.zeros(2, 10, 5), torch.tensor([10, 10]))


def test_the_speaker_adversary_reads_the_ctc_input_through_a_reversed_gradient():
    m = tiny_asr(adversary_speakers=3, ctc_layer=1).train()
    x, lengths = frames(2)
    tokens = torch.tensor([[BOS, 5, 7]] * 2)
    _, enc, who = m(x, lengths, tokens, adversary_scale=0.5)
    assert who.shape == (2, enc.mask.shape[1], 3)
    # the head reads layer 1's normalised output, the CTC head's input: the same logits from it directly
    below = m.encoder(m.features(x, lengths), m.encoder_mask(enc.lengths), num_layers=1).last_hidden_state
    torch.testing.assert_close(who, m.adversary(m.ctc_input(below)))
    # the encoder's gradient from the adversary's loss is -0.5 times that of the same head without the reversal
    labels = torch.tensor([0, 2]).repeat_interleave(enc.lengths)
    steps = enc.mask.bool()
    params = list(m.frontend.parameters())
    loss = torch.nn.functional.cross_entropy(who[steps], labels)
    reversed_ = torch.autograd.grad(loss, params, retain_graph=True)
    plain = torch.autograd.grad(torch.nn.functional.cross_entropy(m.adversary(m.ctc_input(below))[steps], labels),
                                params)
    for r, p in zip(reversed_, plain, strict=True):
        torch.testing.assert_close(r, -0.5 * p)
    # the head itself learns to tell them apart: its gradient is not reversed
    head = torch.autograd.grad(loss, list(m.adversary.parameters()))
    assert all(g.abs().sum() > 0 for g in head)


def test_an_adversary_scale_without_an_adversary_is_refused():
    m = tiny_asr()
    assert m.adversary is None
    x, lengths = frames(1)
    with pytest.raises(ValueError, match="`adversary_scale` > 0 needs a model with `adversary_speakers` > 0"):
        m(x, lengths, torch.tensor([[BOS, 5]]), adversary_scale=1.0)


def test_the_adversary_leaves_the_other_modules_initial_weights_as_they_were():
    plain, adversarial = (dict(tiny_asr(seed=3, **c).named_parameters()) for c in ({}, {"adversary_speakers": 4}))
    assert set(adversarial) - set(plain) == {f"adversary.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")}
    assert all(torch.equal(v, adversarial[k]) for k, v in plain.items())
