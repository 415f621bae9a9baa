"""``AugmentConfig``: how ``attnkit train asr`` changes each training utterance, anew every epoch, in a module
without torch (``train asr --help`` reads it). ``attnkit.tasks.asr_augment`` applies it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...nn.limits import check_fields, floats, ints

__all__ = ["AugmentConfig"]

SNR = floats(-20, 100)
RT60 = floats(0.05, 3)


@dataclass(frozen=True)
class AugmentConfig:
    """How each training utterance is changed, anew every epoch (``attnkit.tasks.asr_augment``'s docstring)."""

    spec_augment: bool = field(default=True, metadata={
        "help": "SpecAugment-style masks: in each training utterance --time-masks time masks of up to "
                "--time-mask-width frames (at most a quarter of it) and --freq-masks frequency masks of up to "
                "--freq-mask-width mel bins, set to the mean"})
    time_masks: int = field(default=2, metadata={"help": "time masks per training utterance (with --spec-augment)",
                                                 "range": ints(0, 32)})
    time_mask_width: int = field(default=8, metadata={
        "help": "the widest time mask, frames (10 ms each; a mask's width is drawn from 0 to it)",
        "range": ints(0, 1000)})
    freq_masks: int = field(default=2, metadata={"help": "frequency masks per training utterance (with "
                                                 "--spec-augment)", "range": ints(0, 32)})
    freq_mask_width: int = field(default=6, metadata={
        "help": "the widest frequency mask, mel bins (a mask's width is drawn from 0 to it)", "range": ints(0, 512)})
    vtlp: float = field(default=0.0, metadata={
        "help": "vocal tract length perturbation: each training utterance's mel bins stretched by a factor drawn "
                "from [1 - vtlp, 1 + vtlp] (0: none)", "range": floats(0, 0.5)})
    speed_perturb: bool = field(default=False, metadata={
        "help": "speed perturbation: each training utterance resampled to 0.9, 1.0 or 1.1 times its speed (pitch "
                "and tempo together, as Kaldi's and ESPnet's recipes), drawn every epoch"})
    noise: float = field(default=0.0, metadata={
        "help": "share of training utterances given additive noise every epoch, coloured from white to brown "
                "(power ~ 1/f^a, a in [0, 2]) at a signal-to-noise ratio drawn from [--noise-snr-min, "
                "--noise-snr-max] (0: none)", "range": floats(0, 1)})
    noise_snr_min: float = field(default=0.0, metadata={"help": "the lowest signal-to-noise ratio of --noise, dB",
                                                        "range": SNR})
    noise_snr_max: float = field(default=20.0, metadata={"help": "the highest signal-to-noise ratio of --noise, dB",
                                                         "range": SNR})
    reverb: float = field(default=0.0, metadata={
        "help": "share of training utterances reverberated every epoch by a synthetic room (the direct path and "
                "exponentially decaying noise) whose reverberation time RT60 is drawn from [--reverb-rt60-min, "
                "--reverb-rt60-max] (0: none)", "range": floats(0, 1)})
    reverb_rt60_min: float = field(default=0.1, metadata={"help": "the shortest RT60 of --reverb, seconds",
                                                          "range": RT60})
    reverb_rt60_max: float = field(default=0.6, metadata={"help": "the longest RT60 of --reverb, seconds",
                                                          "range": RT60})

    def __post_init__(self):
        check_fields(self)
        for name in ("spec_augment", "speed_perturb"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"AugmentConfig: `{name}` must be true or false, got {getattr(self, name)!r:.80}")
        for low, high in (("noise_snr_min", "noise_snr_max"), ("reverb_rt60_min", "reverb_rt60_max")):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(f"AugmentConfig: `{low}` ({getattr(self, low)}) must be at most `{high}` "
                                 f"({getattr(self, high)})")

    @property
    def waveform(self) -> bool:
        """Whether any augmentation works on the waveform (then the features are made per batch)."""
        return self.speed_perturb or self.noise > 0 or self.reverb > 0

    @property
    def any(self) -> bool:
        return self.waveform or self.spec_augment or self.vtlp > 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> AugmentConfig:
        return cls(**d)
