"""Task glue for ``attnkit train asr``: connected spoken digits (FSDD) -> digit text, hybrid CTC/attention.

Training utterances are made by ``attnkit.data.digits`` from the run's seed (of FSDD's recordings, and with
``--tts-voices`` of synthetic voices' too: ``attnkit.data.synthetic_voices``) and changed anew every epoch
(``asr_augment``: speed, reverberation, noise, VTLP, SpecAugment, each an option); the dev set (utterances of
FSDD index 5-9) picks the best checkpoint by the decoder's teacher-forced token accuracy; ``finish`` and
``attnkit evaluate RUN`` decode the test sets (``asr_sets``; and the dev speaker's, ``--dev-speaker``; and synthetic
voices never heard, ``--data tts``, at the end of a run with ``--tts-voices``): digit error
rate (edit distance / reference digits) and utterance accuracy, for CTC one pass, greedy, attention beam and
beam + CTC; ``finish`` writes them to ``RUN/scores.json``. The run loads as a ``Transcriber``
(``attnkit.load_pretrained(RUN)``).
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from ..data.audio import FeatureConfig
from ..data.espeak import EspeakNotFound
from ..models.asr import STREAMING_WINDOW, AsrConfig, AsrModel
from ..nn import TransformerConfig
from ..nn.limits import SEED, floats, ints
from ..outputs import writing
from ..train import IGNORE, Task
from ..train.checkpoint import META, CheckpointError
from ..train.from_meta import config_from_meta, model_from_meta
from . import asr_sets, options
from .asr_augment import Augmenter, waveform_examples
from .asr_stream import latency_lines
from .options import window_of
from .options.asr import ADVERSARY_SCALE, NAME
from .options.augment import AugmentConfig
from .options.voices import SHARE, VOICES, VoicesConfig
from .transcriber import PIECE_SECONDS, Transcriber, lines_of, score_lines, score_set

LOADS_AS_MODEL = True  # attnkit.load_pretrained(RUN) returns a Transcriber
STREAM_CHUNK = 4  # encoder steps (80 ms each at subsample 8) per chunk when evaluate measures a streaming run's latency
LEVEL_DB = floats(-200, 20)  # a run's training level (dB of full-scale power): any level a recording can have
SCORES = "scores.json"  # in the run folder: the closing scores of every set, each decoding (``write_scores``)


def _encoder_configs(args, encoder: TransformerConfig) -> tuple[TransformerConfig, TransformerConfig]:
    enc = encoder.replace(num_decoder_layers=0, positional="rope", max_len=1 << 16)
    dec = encoder.replace(num_encoder_layers=0, num_decoder_layers=args.num_decoder_layers,
                          positional="sinusoidal", max_len=256)
    return enc, dec


def config_from_args(args, encoder: TransformerConfig, speakers: int = 0) -> AsrConfig:
    """The model the options ask for; ``speakers``: the training speakers its adversary tells apart (0: none)."""
    enc, dec = _encoder_configs(args, encoder)
    window = window_of(args, AsrConfig, streaming=STREAMING_WINDOW)
    return AsrConfig(n_mels=args.n_mels, window=window, streaming=args.streaming, subsample=args.subsample,
                     kernel=args.kernel, frontend=args.frontend, channels=args.channels, ctc_weight=args.ctc_weight,
                     ctc_layer=args.ctc_layer, adversary_speakers=speakers, encoder=enc, decoder=dec)


def collate(examples):
    """[(frames (T_i, F), tokens (t_i,)[, speaker])] -> frames (B, T, F), lengths (B,), decoder input (B, t-1),
    labels (B, t-1) (IGNORE after END), CTC targets (sum of digits,), their lengths (B,) and each utterance's
    training speaker (B,) (None for examples without one: dev, test, runs without an adversary)."""
    lengths = torch.tensor([e[0].shape[0] for e in examples])
    frames = torch.nn.utils.rnn.pad_sequence([e[0] for e in examples], batch_first=True)
    tokens = torch.nn.utils.rnn.pad_sequence([e[1] for e in examples], batch_first=True, padding_value=0)
    labels = tokens[:, 1:].masked_fill(tokens[:, 1:] == 0, IGNORE)
    digits = [e[1][1:-1] - 2 for e in examples]  # tokens 3.. -> CTC classes 1..
    speakers = torch.tensor([e[2] for e in examples]) if len(examples[0]) > 2 else None
    return (frames, lengths, tokens[:, :-1], labels, torch.cat(digits), torch.tensor([len(d) for d in digits]),
            speakers)


def forward(model, batch, adversary: float = 0.0):
    """The training pass: the decoder's logits at the scored positions, their labels, the CTC loss (weighted) and
    with ``adversary`` > 0 the speaker adversary's cross-entropy over every step (its gradient reversed into the
    encoder, times ``adversary``). Augmentation happened before, in ``Augmenter`` (``Task.augment``)."""
    frames, lengths, dec_in, labels, targets, target_lengths, speakers = batch
    core = model.module if hasattr(model, "module") else model
    keep = labels != IGNORE
    scale = adversary if speakers is not None else 0.0  # dev batches: no speaker, no adversary
    logits, enc, who = model(frames, lengths, dec_in, positions=keep, adversary_scale=scale)
    w = core.config.ctc_weight
    extra = []
    if w > 0:
        ctc = F.ctc_loss(enc.ctc_log_probs.transpose(0, 1), targets, enc.lengths, target_lengths, blank=0,
                         reduction="mean", zero_infinity=True)
        extra = [ctc * (w / (1 - w))]  # the engine's loss is the cross-entropy: (1-w) CE + w CTC, scaled
    if who is not None:  # (B, T', S): each real step labelled with its utterance's speaker
        extra.append(F.cross_entropy(who[enc.mask.bool()].float(), speakers.repeat_interleave(enc.lengths)))
    return (logits, labels[keep], *extra)


def feature_config(args: argparse.Namespace) -> FeatureConfig:
    """The log-mel front end the arguments ask for; a streaming model always uses the training set's statistics."""
    return FeatureConfig(n_mels=args.n_mels, cepstra=args.cepstra,
                         normalize=args.normalize == "utterance" and not args.streaming)


def _normalisation(examples) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation of every mel bin over the training frames (n_mels,) each."""
    frames = torch.cat([e[0] for e in examples])
    return frames.mean(0), frames.std(0).clamp(min=1e-3)


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    if not 0 <= args.ctc_weight < 1:
        raise ValueError(f"train asr: --ctc-weight must be in [0, 1) (the decoder needs some weight), "
                         f"got {args.ctc_weight}")
    if args.speaker_adversarial > 0 and args.mix_speakers > 0:
        raise ValueError("train asr: --speaker-adversarial needs one speaker per utterance; drop --mix-speakers")
    if args.dev_speaker is not None and args.dev_speaker == args.holdout_speaker:
        raise ValueError(f"train asr: --dev-speaker must differ from --holdout-speaker (settings are never chosen on "
                         f"the test speaker), got {args.dev_speaker!r} for both")
    augment, voices = _config(AugmentConfig, args), _config(VoicesConfig, args)
    features = feature_config(args)
    try:
        meta = {"features": features.to_dict(), **asr_sets.set_meta(args, seed, voices)}
    except EspeakNotFound as e:
        raise EspeakNotFound(f"train asr: --tts-voices {voices.tts_voices}: {e}") from None
    bars, audio = getattr(args, "progress", None), asr_sets.TrainingAudio(features.sample_rate)
    sets = asr_sets.make_sets(meta, ("train", "dev", *asr_sets.test_names(meta)), path=args.data,
                              download=args.download, root=args.data_dir, bars=bars)
    speakers = sets["train"].speakers if args.speaker_adversarial > 0 else None  # the adversary's classes
    if augment.waveform:  # the samples are kept and the features made per batch
        train, lengths, mean, std = waveform_examples(sets["train"], features, "train", bars=bars, watch=audio,
                                                      speakers=speakers)
    else:
        train = asr_sets.examples(sets["train"], features, "train", bars=bars, watch=audio, speakers=speakers)
        lengths, (mean, std) = [e[0].shape[0] for e in train], _normalisation(train)
    dev, test = (asr_sets.examples(sets[name], features, name, bars=bars) for name in ("dev", "recordings"))
    meta.update(audio.meta())
    cfg = config_from_args(args, encoder, len(speakers or ()))
    if speakers:
        meta["adversary"] = {"scale": float(args.speaker_adversarial), "speakers": list(speakers)}
    torch.manual_seed(seed)
    model = AsrModel(cfg)
    model.feature_mean.copy_(mean)
    model.feature_std.copy_(std)
    meta = {"model": cfg.to_dict(), **meta, "decoding": {"beam": 5, "ctc_weight": 0.5}, "augment": augment.to_dict()}
    hook = Augmenter(augment, features, seed, mean, std) if augment.any else None
    step = functools.partial(forward, adversary=float(args.speaker_adversarial)) if speakers else forward
    return Task(NAME, model, train, collate, step, dev=dev, test=test, meta=meta, lengths=lengths, augment=hook)


def _config(cls, args: argparse.Namespace):
    """``cls`` from the options, its error in the options' words (``AugmentConfig: `noise_snr_min` ...`` ->
    ``--noise-snr-min``)."""
    try:
        return options.config_from_args(cls, args)
    except ValueError as e:
        text = str(e)
        for name in vars(args):
            text = text.replace(f"`{name}`", "--" + name.replace("_", "-"))
        raise ValueError(f"train asr: {text.removeprefix(cls.__name__ + ': ')}") from None


def check_meta(folder: Path, meta: dict, n_mels: int) -> None:
    """What a speech recognition run's meta.json holds besides the model's sizes, bounded as the options that made
    it: the features (``FeatureConfig``, its mel bins the model's), the decoding defaults, the longest piece of
    sound decoded at once; the utterance sets ``evaluate`` makes again. One CheckpointError naming file and key."""
    features = config_from_meta(folder, meta, "features", FeatureConfig)
    source = Path(folder) / META
    if features.n_mels != n_mels:
        raise CheckpointError(f"checkpoint: {source}: `features.n_mels` is {features.n_mels}, but the model takes "
                              f"{n_mels} mel bins")
    for key, rng, default in (("decoding.beam", ints(1, 256), 5), ("decoding.ctc_weight", floats(0, 1), 0.3),
                              ("max_seconds", floats(0.1, 3600), PIECE_SECONDS), ("level_db", LEVEL_DB, None),
                              *((f"utterances.{k}", ints(1, 10**7), 1) for k in ("train", "dev", "test")),
                              ("train_seed", SEED, 0), ("mix_speakers", floats(0, 1), 0.0)):
        where = meta
        for part in key.split(".")[:-1]:
            where = where.get(part, {})
            if not isinstance(where, dict):
                raise CheckpointError(f"checkpoint: {source}: `{part}` must be a JSON object, got "
                                      f"{type(where).__name__}")
        value = where.get(key.split(".")[-1], default)
        if not rng.contains(value) and not (value is None and default is None):
            raise CheckpointError(f"checkpoint: {source}: `{key}` must be {rng.text()}"
                                  f"{' or null' if default is None else ''}, got {value!r:.80}")
    for key in ("holdout_speaker", "dev_speaker"):
        if not isinstance(meta.get(key), (str, type(None))):
            raise CheckpointError(f"checkpoint: {source}: `{key}` must be a name or null, got {meta.get(key)!r:.80}")
    _check_tts(source, meta.get("tts"))
    _check_adversary(source, meta.get("adversary"))


def _check_adversary(source: Path, adversary) -> None:
    """``meta["adversary"]`` (runs trained with ``--speaker-adversarial``): its scale and the speakers' names."""
    if adversary is None:
        return
    if not isinstance(adversary, dict):
        raise CheckpointError(f"checkpoint: {source}: `adversary` must be a JSON object, got "
                              f"{type(adversary).__name__}")
    if not ADVERSARY_SCALE.contains(adversary.get("scale")):
        raise CheckpointError(f"checkpoint: {source}: `adversary.scale` must be {ADVERSARY_SCALE.text()}, got "
                              f"{adversary.get('scale')!r:.80}")
    names = adversary.get("speakers")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise CheckpointError(f"checkpoint: {source}: `adversary.speakers` must be a list of names, got {names!r:.80}")


def _check_tts(source: Path, tts) -> None:
    """``meta["tts"]`` (runs trained with synthetic voices): voices, share and takes in the options' ranges."""
    if tts is None:
        return
    if not isinstance(tts, dict):
        raise CheckpointError(f"checkpoint: {source}: `tts` must be a JSON object, got {type(tts).__name__}")
    for key, rng in (("voices", ints(1, VOICES.high)), ("share", SHARE), ("takes", ints(1, 1000))):
        if not rng.contains(tts.get(key)):
            raise CheckpointError(f"checkpoint: {source}: `tts.{key}` must be {rng.text()}, got {tts.get(key)!r:.80}")


def load(folder: Path, meta: dict) -> Transcriber:
    model = model_from_meta(folder, meta, lambda: AsrModel(AsrConfig.from_dict(meta["model"])))
    check_meta(folder, meta, model.config.n_mels)
    return Transcriber(model.eval(), meta)


def task_for(model, meta: dict, args=None) -> Task:
    return Task(NAME, model.model, [None], collate, forward, meta=meta)


def evaluation_data(meta: dict, path, args=None):
    raise ValueError("evaluate: speech recognition runs are scored by decoding (attnkit evaluate RUN)")


def score(tr: Transcriber, meta: dict, args, generate_kwargs: dict) -> list[str]:
    """``attnkit evaluate RUN [--data test|recordings|speaker|dev|dev-speaker|tts|FILE.tsv] [--beam K]``."""
    beam = generate_kwargs.get("num_beams", meta.get("decoding", {}).get("beam", 5))
    data = args.data or "test"
    lines = []
    for _, (title, audio, refs) in asr_sets.named_sets(meta, data, args).items():
        lines += score_lines(tr, title, audio, refs, beam=beam, ctc_weight=getattr(args, "ctc_weight", None))
    if tr.model.config.streaming and data in ("test", "recordings"):  # the spans of the digits are known
        utts = asr_sets.make_sets(meta, ("recordings",), download=getattr(args, "download", False),
                                  root=getattr(args, "data_dir", None))["recordings"]
        lines += latency_lines(tr.model, tr.features, utts, STREAM_CHUNK)
    return lines


def predict(tr: Transcriber, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    return tr.transcribe(inputs)


def finish(args, task: Task, result: dict) -> list[str]:
    """After training: the best checkpoint decoded on the test sets and the dev speaker's (CTC one pass and the
    default decoding), printed and written to ``RUN/scores.json``."""
    if result.get("interrupted") or result.get("time_budget_reached"):
        return []
    scores = write_scores(args.out, args, path=args.data, bars=getattr(args, "progress", None))
    return [line for s in scores["sets"].values() for line in lines_of(s["title"], s)]


def write_scores(out: Path, args=None, *, path=None, bars: bool | None = None) -> dict:
    """``out/scores.json``: the run's best checkpoint scored on each set it reports (``asr_sets.report_names``), CTC
    one pass and the default decoding: ``{"checkpoint", "step", "sets": {name: {"title", **score_set(...)}}}``."""
    from ..train.checkpoint import load_meta

    folder, meta = load_meta(out, which="best")
    tr = load(folder, meta)
    sets = {}
    for name, (title, audio, refs) in asr_sets.sets_of(meta, asr_sets.report_names(meta), args, path).items():
        sets[name] = {"title": title, **score_set(tr, title, audio, refs, beam=meta["decoding"]["beam"],
                                                  modes=("ctc", "joint"), bars=bars)}
    scores = {"checkpoint": folder.name, "step": meta.get("step"), "sets": sets}
    target = Path(out) / SCORES
    with writing(target):
        target.write_text(json.dumps(scores, indent=1) + "\n", encoding="utf-8")
    return scores
