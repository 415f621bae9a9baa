"""Data augmentation of ``attnkit train asr``: the training utterances changed anew every epoch, as they are batched.

Per training utterance, in this order (each an option, ``AugmentConfig`` in ``options.augment``):

1. on the waveform: speed perturbation (``speed_perturb``: a factor of 0.9, 1.0 or 1.1), reverberation by a
   synthetic room (``reverb``), additive coloured noise (``noise``) (``attnkit.data.augment``); then its log-mel
   features are computed again;
2. on the features: vocal tract length perturbation (``vtlp``: the mel bins stretched) and SpecAugment-style time
   and frequency masks (``spec_augment``).

Every draw comes from ``numpy.random.default_rng([seed, epoch, utterance, k])``, one generator per augmentation
``k``: the run's seed, the epoch and the utterance's index in the training set alone. A resumed run draws what an
uninterrupted one does, whatever the batch size, and switching one augmentation on or off leaves the others' draws
as they were. With a waveform augmentation on, training examples hold their samples (16-bit, the memory the
features took) and the features are made per batch: the cost per epoch is in docs/asr.md.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..data.audio import FeatureConfig, log_mel
from ..data.augment import SPEED_FACTORS, add_noise, coloured_noise, reverberate, room_impulse_response, speed_perturb
from ..models.asr import BOS, EOS, digit_tokens
from ..models.speech import spec_augment, warp_frequency
from ..train.progress import ticker
from .asr_sets import speaker_index
from .options.augment import AugmentConfig

__all__ = ["AugmentConfig", "Augmenter", "waveform_examples", "utterance_rng", "PCM_SCALE"]

PCM_SCALE = 32767.0  # training samples are kept as 16-bit integers: x * PCM_SCALE, rounded
NOISE_EXPONENTS = (0.0, 2.0)  # coloured noise: power ~ 1 / f^a, a drawn in this range (white .. brown)
SPEED, REVERB, NOISE, VTLP, MASKS = range(5)  # each augmentation's own generator


def utterance_rng(seed: int, epoch: int, index: int, k: int) -> np.random.Generator:
    """The generator of augmentation ``k`` for training utterance ``index`` in ``epoch`` of a run seeded ``seed``."""
    return np.random.default_rng([seed, epoch, index, k])


class Augmenter:
    """``Task.augment`` of train asr: ``(examples, indices, epoch) -> examples``, each (frames (T, n_mels), tokens).

    ``examples`` hold features (T, n_mels), or 16-bit samples (S,) (``waveform_examples``): the waveform
    augmentations need the samples; on features only VTLP and the masks apply.
    ``mean`` and ``std`` (n_mels,): the model's feature normalisation (SpecAugment's masks are its mean)."""

    def __init__(self, config: AugmentConfig, features: FeatureConfig, seed: int, mean: Tensor, std: Tensor):
        self.config, self.features, self.seed, self.mean, self.std = config, features, int(seed), mean, std

    def __call__(self, examples: list, indices: list[int], epoch: int) -> list[tuple]:
        return [self.one(e, i, epoch) for e, i in zip(examples, indices)]

    def one(self, example, index: int, epoch: int) -> tuple:
        """(x, tokens[, speaker]) -> (frames changed, tokens[, speaker])."""
        x, tokens, *rest = example
        rng = lambda k: utterance_rng(self.seed, epoch, index, k)  # noqa: E731
        if isinstance(x, np.ndarray):  # 16-bit samples (waveform_examples): changed, then their features made
            x = log_mel(self.waveform(x.astype(np.float32) / PCM_SCALE, rng), self.features)
        return self.spectral(x, rng), tokens, *rest

    def waveform(self, x: np.ndarray, rng) -> np.ndarray:
        """Samples (S,) -> speed perturbed, reverberated, noisy, each as the config asks."""
        cfg, rate = self.config, self.features.sample_rate
        if cfg.speed_perturb:
            x = speed_perturb(x, SPEED_FACTORS[int(rng(SPEED).integers(len(SPEED_FACTORS)))])
        if cfg.reverb > 0:
            g = rng(REVERB)
            if g.random() < cfg.reverb:
                x = reverberate(x, room_impulse_response(g.uniform(cfg.reverb_rt60_min, cfg.reverb_rt60_max), rate, g))
        if cfg.noise > 0:
            g = rng(NOISE)
            if g.random() < cfg.noise:
                noise = coloured_noise(len(x), g.uniform(*NOISE_EXPONENTS), g)
                x = add_noise(x, noise, g.uniform(cfg.noise_snr_min, cfg.noise_snr_max), rate)
        return np.clip(x, -1.0, 1.0)

    def spectral(self, frames: Tensor, rng) -> Tensor:
        """Frames (T, n_mels) -> warped (VTLP), then masked (SpecAugment), as the config asks."""
        cfg = self.config
        if cfg.vtlp > 0:
            factor = 1 + cfg.vtlp * (2 * rng(VTLP).random() - 1)
            frames = warp_frequency(frames[None], torch.tensor([factor], dtype=torch.float32))[0]
        if cfg.spec_augment:
            g = torch.Generator().manual_seed(int(rng(MASKS).integers(2**62)))
            z = (frames - self.mean) / self.std  # masks in normalised units: a masked cell is the mean
            z = spec_augment(z[None], torch.tensor([frames.shape[0]]), time_masks=cfg.time_masks,
                             time_width=cfg.time_mask_width, freq_masks=cfg.freq_masks,
                             freq_width=cfg.freq_mask_width, generator=g)[0]
            frames = z * self.std + self.mean
        return frames


def waveform_examples(utterances, features: FeatureConfig, what: str = "utterances", *, bars: bool | None = None,
                      watch=None, speakers: list[str] | None = None) -> tuple[list[tuple], list[int], Tensor, Tensor]:
    """Training examples that keep their samples: ([(int16 samples (S,), tokens)], frames of each, and the mean and
    standard deviation of every mel bin over the unchanged utterances' frames (n_mels,) each); ``watch(utterance)``
    sees each one; with ``speakers``, each example ends with its speaker's index among them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # short transforms only lose time handing work between threads
    tick = ticker(f"prepare {what}", len(utterances), "utterances", bars=bars)
    out, lengths = [], []
    total = torch.zeros(features.n_mels, dtype=torch.float64)
    squares, count = torch.zeros_like(total), 0
    try:
        for u in utterances:
            f = log_mel(u.samples, features).double()
            total += f.sum(0)
            squares += f.square().sum(0)
            count += f.shape[0]
            pcm = np.round(np.clip(u.samples, -1.0, 1.0) * PCM_SCALE).astype(np.int16)
            out.append((pcm, torch.tensor([BOS, *digit_tokens(u.digits), EOS]), *speaker_index(u, speakers)))
            lengths.append(f.shape[0])
            if watch is not None:
                watch(u)
            tick.update()
    finally:
        tick.close()
        torch.set_num_threads(threads)
    mean = total / max(count, 1)
    var = (squares - count * mean.square()) / max(count - 1, 1)
    return out, lengths, mean.float(), var.clamp(min=0).sqrt().float().clamp(min=1e-3)
