"""Task glue for ``attnkit train asr``: connected spoken digits (FSDD) -> digit text, hybrid CTC/attention.

Training utterances are made by ``attnkit.data.digits`` from the run's seed; the dev set (utterances of
FSDD index 5-9) picks the best checkpoint by the decoder's teacher-forced token accuracy; ``finish`` and
``attnkit evaluate RUN`` decode the test sets (``asr_sets``): digit error rate (edit distance / reference
digits) and utterance accuracy, for CTC one pass, greedy, attention beam and beam + CTC. The run loads as
a ``Transcriber`` (``attnkit.load_pretrained(RUN)``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

from ..data.audio import FeatureConfig
from ..models.asr import AsrConfig, AsrModel
from ..models.speech import spec_augment, warp_frequency
from ..nn import TransformerConfig
from ..nn.limits import SEED, floats, ints
from ..train import IGNORE, Task
from ..train.checkpoint import META, CheckpointError
from ..train.from_meta import config_from_meta, model_from_meta
from . import asr_sets
from .asr_stream import latency_lines
from .options.asr import NAME
from .transcriber import PIECE_SECONDS, Transcriber, score_lines

LOADS_AS_MODEL = True  # attnkit.load_pretrained(RUN) returns a Transcriber
STREAM_CHUNK = 4  # encoder steps (80 ms each at subsample 8) per chunk when evaluate measures a streaming run's latency


def _encoder_configs(args, encoder: TransformerConfig) -> tuple[TransformerConfig, TransformerConfig]:
    enc = encoder.replace(num_decoder_layers=0, positional="rope", max_len=1 << 16)
    dec = encoder.replace(num_encoder_layers=0, num_decoder_layers=args.num_decoder_layers,
                          positional="sinusoidal", max_len=256)
    return enc, dec


def config_from_args(args, encoder: TransformerConfig) -> AsrConfig:
    enc, dec = _encoder_configs(args, encoder)
    window = args.window
    if args.streaming and window == (8, 8):
        window = (16, 0)
    return AsrConfig(n_mels=args.n_mels, window=window, streaming=args.streaming, subsample=args.subsample,
                     kernel=args.kernel, frontend=args.frontend, channels=args.channels, ctc_weight=args.ctc_weight,
                     ctc_layer=args.ctc_layer, encoder=enc, decoder=dec)


def collate(examples):
    """[(frames (T_i, F), tokens (t_i,))] -> frames (B, T, F), lengths (B,), decoder input (B, t-1),
    labels (B, t-1) (IGNORE after END), CTC targets (sum of digits,) and their lengths (B,)."""
    lengths = torch.tensor([e[0].shape[0] for e in examples])
    frames = torch.nn.utils.rnn.pad_sequence([e[0] for e in examples], batch_first=True)
    tokens = torch.nn.utils.rnn.pad_sequence([e[1] for e in examples], batch_first=True, padding_value=0)
    labels = tokens[:, 1:].masked_fill(tokens[:, 1:] == 0, IGNORE)
    digits = [e[1][1:-1] - 2 for e in examples]  # tokens 3.. -> CTC classes 1..
    return frames, lengths, tokens[:, :-1], labels, torch.cat(digits), torch.tensor([len(d) for d in digits])


def make_forward(augment: bool, vtlp: float = 0.0):
    def forward(model, batch):
        frames, lengths, dec_in, labels, targets, target_lengths = batch
        core = model.module if hasattr(model, "module") else model
        if model.training and vtlp > 0:  # each utterance's frequency axis stretched by 1 +- up to vtlp
            frames = warp_frequency(frames, 1 + vtlp * (2 * torch.rand(frames.shape[0], device=frames.device) - 1))
        if model.training and augment:  # masks in normalised units: a masked cell is the mean
            mean, std = core.feature_mean, core.feature_std
            frames = spec_augment((frames - mean) / std, lengths) * std + mean
        keep = labels != IGNORE
        logits, enc = model(frames, lengths, dec_in, positions=keep)
        w = core.config.ctc_weight
        extra = []
        if w > 0:
            ctc = F.ctc_loss(enc.ctc_log_probs.transpose(0, 1), targets, enc.lengths, target_lengths, blank=0,
                             reduction="mean", zero_infinity=True)
            extra = [ctc * (w / (1 - w))]  # the engine's loss is the cross-entropy: (1-w) CE + w CTC, scaled
        return (logits, labels[keep], *extra)

    return forward


def feature_config(args: argparse.Namespace) -> FeatureConfig:
    """The log-mel front end the arguments ask for; a streaming model always uses the training set's statistics."""
    return FeatureConfig(n_mels=args.n_mels, normalize=args.normalize == "utterance" and not args.streaming)


def _normalisation(examples) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation of every mel bin over the training frames (n_mels,) each."""
    frames = torch.cat([e[0] for e in examples])
    return frames.mean(0), frames.std(0).clamp(min=1e-3)


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    if not 0 <= args.ctc_weight < 1:
        raise ValueError(f"train asr: --ctc-weight must be in [0, 1) (the decoder needs some weight), "
                         f"got {args.ctc_weight}")
    cfg = config_from_args(args, encoder)
    features = feature_config(args)
    meta = {"features": features.to_dict(), **asr_sets.set_meta(args, seed)}
    sets = asr_sets.make_sets(meta, ("train", "dev", *asr_sets.test_names(meta)), path=args.data,
                              download=args.download, root=args.data_dir)
    bars = getattr(args, "progress", None)
    train, dev, test = (asr_sets.examples(sets[name], features, name, bars=bars) for name in ("train", "dev",
                                                                                              "recordings"))
    meta["max_seconds"] = round(max(len(u.samples) for u in sets["train"]) / features.sample_rate, 2)
    torch.manual_seed(seed)
    model = AsrModel(cfg)
    mean, std = _normalisation(train)
    model.feature_mean.copy_(mean)
    model.feature_std.copy_(std)
    meta = {"model": cfg.to_dict(), **meta, "decoding": {"beam": 5, "ctc_weight": 0.5},
            "augment": {"spec_augment": args.augment, "vtlp": args.vtlp}}
    return Task(NAME, model, train, collate, make_forward(args.augment, args.vtlp), dev=dev, test=test, meta=meta,
                lengths=[e[0].shape[0] for e in train])


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
                              ("max_seconds", floats(0.1, 3600), PIECE_SECONDS),
                              *((f"utterances.{k}", ints(1, 10**7), 1) for k in ("train", "dev", "test")),
                              ("train_seed", SEED, 0)):
        where = meta
        for part in key.split(".")[:-1]:
            where = where.get(part, {})
            if not isinstance(where, dict):
                raise CheckpointError(f"checkpoint: {source}: `{part}` must be a JSON object, got "
                                      f"{type(where).__name__}")
        value = where.get(key.split(".")[-1], default)
        if not rng.contains(value):
            raise CheckpointError(f"checkpoint: {source}: `{key}` must be {rng.text()}, got {value!r:.80}")
    if not isinstance(meta.get("holdout_speaker"), (str, type(None))):
        raise CheckpointError(f"checkpoint: {source}: `holdout_speaker` must be a name or null, got "
                              f"{meta.get('holdout_speaker')!r:.80}")


def load(folder: Path, meta: dict) -> Transcriber:
    model = model_from_meta(folder, meta, lambda: AsrModel(AsrConfig.from_dict(meta["model"])))
    check_meta(folder, meta, model.config.n_mels)
    return Transcriber(model.eval(), meta)


def task_for(model, meta: dict, args=None) -> Task:
    return Task(NAME, model.model, [None], collate, make_forward(False), meta=meta)


def evaluation_data(meta: dict, path, args=None):
    raise ValueError("evaluate: speech recognition runs are scored by decoding (attnkit evaluate RUN)")


def score(tr: Transcriber, meta: dict, args, generate_kwargs: dict) -> list[str]:
    """``attnkit evaluate RUN [--data test|recordings|speaker|dev|FILE.tsv] [--beam K]``."""
    beam = generate_kwargs.get("num_beams", meta.get("decoding", {}).get("beam", 5))
    data = args.data or "test"
    named = asr_sets.named_sets(meta, data, args)
    lines = []
    for name, (audio, refs) in named.items():
        lines += score_lines(tr, name, audio, refs, beam=beam, ctc_weight=getattr(args, "ctc_weight", None))
    if tr.model.config.streaming and data in ("test", "recordings"):  # the spans of the digits are known
        utts = asr_sets.make_sets(meta, ("recordings",), download=getattr(args, "download", False),
                                  root=getattr(args, "data_dir", None))["recordings"]
        lines += latency_lines(tr.model, tr.features, utts, STREAM_CHUNK)
    return lines


def predict(tr: Transcriber, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    return tr.transcribe(inputs)


def finish(args, task: Task, result: dict) -> list[str]:
    """After training: the best checkpoint decoded on the test sets (the default decoding and CTC one pass)."""
    from ..train.checkpoint import load_meta

    if result.get("interrupted") or result.get("time_budget_reached"):
        return []
    folder, meta = load_meta(args.out, which="best")
    tr = load(folder, meta)
    lines = []
    for name, (audio, refs) in asr_sets.named_sets(meta, "test", args).items():
        lines += score_lines(tr, name, audio, refs, beam=meta["decoding"]["beam"], modes=("ctc", "joint"),
                             bars=getattr(args, "progress", None))
    return lines
