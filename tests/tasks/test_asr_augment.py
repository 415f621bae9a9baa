"""train asr's augmentation: each one deterministic in (seed, epoch, utterance) and nothing else, the others' draws
untouched when one is switched on, the samples kept as 16-bit when the waveform is changed, and a resumed run with
every augmentation on equal, bit for bit, to an uninterrupted one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnkit.cli.main import build_parser
from attnkit.data.audio import FeatureConfig, log_mel
from attnkit.data.digits import DigitUtterances, pools
from attnkit.data.fsdd import load_fsdd
from attnkit.nn import TransformerConfig
from attnkit.tasks import asr
from attnkit.tasks.asr_augment import PCM_SCALE, AugmentConfig, Augmenter, waveform_examples
from attnkit.tasks.options import config_from_args
from attnkit.train import TrainConfig, Trainer
from tests.cli.test_asr_cli import TINY
from tests.data.test_fsdd import write_set

pytestmark = pytest.mark.usefixtures("one_thread")
FEATURES = FeatureConfig(n_mels=16)
EVERYTHING = dict(speed_perturb=True, noise=1.0, reverb=1.0, vtlp=0.1, spec_augment=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("asr_aug")
    write_set(root / "fsdd" / "recordings", speakers=("alice", "bob", "carol"), digits=range(10), indices=range(11))
    utts = DigitUtterances(pools(load_fsdd(root / "fsdd" / "recordings"))["train"], 6, seed=0)
    return root, utts


def augmenter(utts, seed=0, **options):
    examples, lengths, mean, std = waveform_examples(utts, FEATURES, bars=False)
    return Augmenter(AugmentConfig(**options), FEATURES, seed, mean, std), examples


def frames_of(aug, examples, indices, epoch):
    return [f for f, _ in aug(examples, indices, epoch)]


@pytest.mark.parametrize("options", [dict(speed_perturb=True, spec_augment=False), dict(noise=1.0, spec_augment=False),
                                     dict(reverb=1.0, spec_augment=False), dict(vtlp=0.2, spec_augment=False),
                                     dict(spec_augment=True), EVERYTHING], ids=lambda o: "+".join(o))
def test_each_augmentation_is_a_function_of_seed_epoch_and_utterance(data, options):
    _, utts = data
    aug, examples = augmenter(utts, **options)
    plain = [log_mel(u.samples, FEATURES) for u in utts]
    a = frames_of(aug, examples, [0, 1, 2], epoch=1)
    b = frames_of(aug, examples, [0, 1, 2], epoch=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b))  # same seed, epoch, utterance: the same frames
    alone = frames_of(aug, examples[1:2], [1], epoch=1)[0]  # whatever the batch it comes in
    assert torch.equal(alone, a[1])
    for other in (frames_of(aug, examples, [0, 1, 2], epoch=2),  # another epoch
                  frames_of(augmenter(utts, seed=1, **options)[0], examples, [0, 1, 2], epoch=1)):  # another seed
        assert sum(not (x.shape == y.shape and torch.allclose(x, y)) for x, y in zip(a, other)) >= 2
    # every utterance changed from its plain features (speed: 1.0 is one of three factors, so by some utterance)
    changed = [not (x.shape == p.shape and torch.allclose(x, p, atol=1e-3)) for x, p in zip(a, plain)]
    assert sum(changed) >= 2, options


def test_spec_augment_counts_and_widths_set_the_masked_cells(data):
    _, utts = data
    first = [utts[i] for i in range(6)]
    aug, examples = augmenter(first, spec_augment=False)
    plain = [frames_of(aug, examples, list(range(6)), epoch) for epoch in (1, 2, 3)]

    def masked(**options):  # cells changed from the plain features, over 6 utterances and 3 epochs
        aug, examples = augmenter(first, spec_augment=True, **options)
        return sum(int(((f - p).abs() > 1e-4).sum()) for epoch in (1, 2, 3)
                   for f, p in zip(frames_of(aug, examples, list(range(6)), epoch), plain[epoch - 1]))

    assert masked(time_masks=0, freq_masks=0) == 0
    assert masked(time_masks=0, freq_masks=2, freq_mask_width=6) < masked(time_masks=0, freq_masks=2,
                                                                           freq_mask_width=20)
    assert masked(time_masks=2, time_mask_width=8, freq_masks=0) < masked(time_masks=4, time_mask_width=30,
                                                                           freq_masks=0)
    assert masked() == masked(time_masks=2, time_mask_width=8, freq_masks=2, freq_mask_width=6)  # the defaults


def test_switching_one_augmentation_on_leaves_the_others_draws(data):
    _, utts = data
    speed, examples = augmenter(utts, speed_perturb=True, spec_augment=False)
    both = augmenter(utts, speed_perturb=True, noise=1.0, spec_augment=False)[0]
    for i in range(6):
        a, b = frames_of(speed, examples, [i], 0)[0], frames_of(both, examples, [i], 0)[0]
        assert a.shape == b.shape  # the same speed factor drawn
    factors = {round(len(speed.waveform(e[0].astype(np.float32) / PCM_SCALE,
                                        lambda k, i=i: np.random.default_rng([0, 0, i, k]))) / len(e[0]), 2)
               for i, e in enumerate(examples)}
    assert factors <= {0.91, 1.0, 1.11} and len(factors) >= 2  # 1 / 1.1, 1, 1 / 0.9


def test_waveform_examples_keep_16_bit_samples_and_the_training_statistics(data):
    _, utts = data
    examples, lengths, mean, std = waveform_examples(utts, FEATURES, bars=False)
    for (pcm, tokens), u, n in zip(examples, utts, lengths):
        assert pcm.dtype == np.int16 and np.abs(pcm / PCM_SCALE - u.samples).max() <= 0.5 / PCM_SCALE + 1e-7
        assert n == log_mel(u.samples, FEATURES).shape[0] and tokens.tolist()[1:-1] == [3 + d for d in u.digits]
    frames = torch.cat([log_mel(u.samples, FEATURES) for u in utts])
    torch.testing.assert_close(mean, frames.mean(0), atol=1e-4, rtol=0)
    torch.testing.assert_close(std, frames.std(0).clamp(min=1e-3), atol=1e-4, rtol=1e-4)


def test_augment_config_is_checked_and_named_in_options_words(data):
    with pytest.raises(ValueError, match="`noise_snr_min` \\(30.0\\) must be at most `noise_snr_max` \\(20.0\\)"):
        AugmentConfig(noise_snr_min=30.0)
    with pytest.raises(ValueError, match="`reverb` must be a number in \\[0, 1\\]"):
        AugmentConfig(reverb=2.0)
    with pytest.raises(ValueError, match="`freq_masks` must be an integer in \\[0, 32\\]"):
        AugmentConfig(freq_masks=-1)
    root, _ = data
    args = build_parser().parse_args(["train", "asr", "--out", str(root / "x"), "--data-dir", str(root),
                                      "--reverb-rt60-min", "1", "--reverb-rt60-max", "0.5", *TINY])
    with pytest.raises(ValueError, match="^train asr: --reverb-rt60-min \\(1.0\\) must be at most --reverb-rt60-max"):
        asr.build(args, config_from_args(TransformerConfig, args))
    assert not AugmentConfig(spec_augment=False).any and AugmentConfig(noise=0.5).waveform


def tiny_task(root, out, extra=()):
    args = build_parser().parse_args(["train", "asr", "--out", str(out), "--data-dir", str(root), *TINY,
                                      "--speed-perturb", "--noise", "0.5", "--reverb", "0.5", "--vtlp", "0.1",
                                      "--max-steps", "6", "--eval-every", "3", *extra])
    return asr.build(args, config_from_args(TransformerConfig, args), seed=0), config_from_args(TrainConfig, args)


@pytest.mark.parametrize("extra", [(), ("--speaker-adversarial", "0.5")], ids=["augmentation", "and-adversary"])
def test_a_resumed_run_with_every_augmentation_equals_an_uninterrupted_one(data, tmp_path, extra):
    root, _ = data
    full, cfg = tiny_task(root, tmp_path / "full", extra)
    assert isinstance(full.train[0][0], np.ndarray) and full.meta["augment"]["speed_perturb"] is True
    if extra:  # each training example names its speaker; the model has the adversary, the meta its speakers
        assert {e[2] for e in full.train} == {0, 1, 2} and full.model.adversary is not None
        assert full.meta["adversary"] == {"scale": 0.5, "speakers": ["alice", "bob", "carol"]}
    Trainer(full, cfg).fit(tmp_path / "full")
    if extra:  # the adversary's loss reaches the training loss: its head learned (the engine adds every extra loss)
        fresh = tiny_task(root, tmp_path / "fresh", extra)[0].model.adversary.state_dict()
        assert all(not torch.equal(v, fresh[k]) for k, v in full.model.adversary.state_dict().items())
    part, _ = tiny_task(root, tmp_path / "part", extra)
    res = Trainer(part, cfg, on_step=lambda t, step, rec: step == 4 and t.request_stop()).fit(tmp_path / "part")
    assert res["interrupted"] and res["step"] == 4
    torch.manual_seed(123)  # the global generator is not where the augmentation draws from
    resumed, _ = tiny_task(root, tmp_path / "part", extra)
    Trainer(resumed, cfg).fit(tmp_path / "part", resume=True)
    for k, v in full.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[k], v, rtol=0, atol=0)
