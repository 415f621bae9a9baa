"""``VoicesConfig``: the synthetic voices ``attnkit train asr`` adds to its training recordings, in a module without
torch (``train asr --help`` reads it). ``attnkit.data.synthetic_voices`` makes the voices, ``attnkit.tasks.asr_sets``
puts them in the training set."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...nn.limits import check_fields, floats, ints

__all__ = ["VoicesConfig", "TITLE", "VOICES", "SHARE"]

VOICES = ints(0, 1000)
SHARE = floats(0, 1, open_low=True)

TITLE = ("synthetic voices (eSpeak NG, made once and cached; needs pip install 'attnkit[tts]' or apt install "
         "espeak-ng)")


@dataclass(frozen=True)
class VoicesConfig:
    """Synthetic speakers of the digits added to the training recordings (never to dev or test)."""

    tts_voices: int = field(default=0, metadata={
        "help": "synthetic speakers added to the training recordings: eSpeak NG's English accents and voice "
                "variants at drawn pitch, intonation and rate, each digit said 10 times (attnkit.data."
                "synthetic_voices; their variants are never those of evaluate --data tts) (0: none)",
        "range": VOICES})
    tts_share: float = field(default=0.5, metadata={
        "help": "share of the training utterances spoken by a synthetic voice when --tts-voices is given (each "
                "utterance is one speaker's: a synthetic one with this probability, else one of FSDD's)",
        "range": SHARE})

    def __post_init__(self):
        check_fields(self)

    @property
    def any(self) -> bool:
        return self.tts_voices > 0

    def to_dict(self) -> dict:
        return asdict(self)
