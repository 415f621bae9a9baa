"""Task glue for ``attnkit train speech``: FSDD spoken digits, log-mel frames, truncated self-attention."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import Tensor

from ..data.audio import FeatureConfig, log_mel, read_wav
from ..data.fsdd import load_fsdd, official_split, speaker_split
from ..models.speech import SpeechClassifier, SpeechConfig, spec_augment
from ..nn import TransformerConfig
from ..train import Task
from ..train.checkpoint import META, CheckpointError
from ..train.from_meta import config_from_meta, listed, model_from_meta
from .options import add_config_args, add_data_args, add_window_arg, split_item

NAME = "speech"
HELP = "spoken digit classification (FSDD): log-mel frames, Transformer encoder with truncated self-attention"
ENCODER_DEFAULTS = dict(d_model=96, num_heads=4, d_ff=192, num_encoder_layers=4, dropout=0.1,
                        activation="gelu", norm_first=True, positional="sinusoidal")
TRAIN_DEFAULTS = dict(epochs=30, batch_size=32, lr=2e-3, warmup_steps=200, weight_decay=0.05,
                      schedule="cosine", label_smoothing=0.1, eval_batch_size=128)
ENCODER_FIELDS = ("d_model", "num_heads", "d_ff", "num_encoder_layers", "dropout", "attention_dropout",
                  "activation", "norm_first", "positional")
EVALUATION_DATA = ("speech: train or test of the run's FSDD split, or recordings (an archive or a folder of WAVs) "
                   "(default: test)")
LABELS = [str(d) for d in range(10)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None, metavar="PATH",
                   help="recordings.tar.gz, a folder of WAVs, or a folder holding either "
                        "(default: <data dir>/fsdd/recordings.tar.gz)")
    add_data_args(p, "fsdd/", "fetch the dataset from GitHub into the cache if missing")
    add_window_arg(p, SpeechConfig)
    add_config_args(p, SpeechConfig, only=("subsample",), title="speech model")
    add_config_args(p, FeatureConfig, only=("n_mels",), title="features")
    p.add_argument("--holdout-speaker", default=None, metavar="NAME",
                   help="test on every recording of this speaker, train on the others (default: the official "
                        "split, index 0-4 = test)")
    p.add_argument("--dev", action="store_true",
                   help="carve a dev set out of train (index 5-9) for best-checkpoint selection")
    p.add_argument("--no-augment", dest="augment", action="store_false",
                   help="train without SpecAugment-style time and frequency masking")


def featurize(recs, features: FeatureConfig) -> list[tuple[Tensor, int]]:
    return [(log_mel(r.samples, features), r.digit) for r in recs]


def collate(examples: list[tuple[Tensor, int]]):
    lengths = torch.tensor([e[0].shape[0] for e in examples])
    x = torch.nn.utils.rnn.pad_sequence([e[0] for e in examples], batch_first=True)  # (B, T, n_mels)
    return x, lengths, torch.tensor([e[1] for e in examples])


def make_forward(augment: bool):
    def forward(model, batch):
        x, lengths, labels = batch
        if model.training and augment:
            x = spec_augment(x, lengths)
        return model(x, lengths), labels

    return forward


def splits(recs, holdout_speaker: str | None, dev: bool):
    train, test = speaker_split(recs, holdout_speaker) if holdout_speaker else official_split(recs)
    dev_set = None
    if dev:
        dev_set = [r for r in train if 5 <= r.index < 10]
        train = [r for r in train if not 5 <= r.index < 10]
    return train, dev_set, test


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    features = FeatureConfig(n_mels=args.n_mels)
    recs = load_fsdd(args.data, download=args.download, root=args.data_dir)
    train, dev, test = splits(recs, args.holdout_speaker, args.dev)
    train_ex, test_ex = featurize(train, features), featurize(test, features)
    dev_ex = featurize(dev, features) if dev is not None else None
    cfg = SpeechConfig(n_mels=args.n_mels, window=args.window, subsample=args.subsample,
                       encoder=encoder.replace(num_decoder_layers=0, max_len=4096))
    torch.manual_seed(seed)
    model = SpeechClassifier(cfg)
    meta = {"model": cfg.to_dict(), "features": features.to_dict(), "labels": LABELS,
            "holdout_speaker": args.holdout_speaker}
    return Task(NAME, model, train_ex, collate, make_forward(args.augment), dev=dev_ex, test=test_ex, meta=meta,
                lengths=[e[0].shape[0] for e in train_ex])


def load(folder: Path, meta: dict) -> SpeechClassifier:
    model = model_from_meta(folder, meta, lambda: SpeechClassifier(SpeechConfig.from_dict(meta["model"])))
    listed(folder, meta, "labels", model.config.num_classes)
    features = config_from_meta(folder, meta, "features", FeatureConfig)  # bounded before any sound is read
    if features.n_mels != model.config.n_mels:
        raise CheckpointError(f"checkpoint: {folder / META}: `features.n_mels` is {features.n_mels}, but the model "
                              f"takes {model.config.n_mels} mel bins")
    return model.eval()


def task_for(model, meta: dict, args=None) -> Task:
    return Task(NAME, model, [None], collate, make_forward(False), meta=meta)


def _split(meta: dict, name: str, args=None):
    """The run's train or test recordings (its official or held-out-speaker split)."""
    recs = load_fsdd(download=getattr(args, "download", False), root=getattr(args, "data_dir", None),
                     sample_rate=FeatureConfig(**meta["features"]).sample_rate)
    train, _, test = splits(recs, meta.get("holdout_speaker"), False)
    return train if name == "train" else test


def evaluation_data(meta: dict, path: str | None, args=None):
    """``--data test`` (default) = the checkpoint's test split; a path = every recording found there."""
    features = FeatureConfig(**meta["features"])
    if path in (None, "test", "train"):
        return featurize(_split(meta, path or "test", args), features)
    return featurize(load_fsdd(path, verify=False), features)


@torch.no_grad()
def predict(model: SpeechClassifier, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    """Each input is a WAV file (resampled to the model's rate if needed) or ``train:N`` / ``test:N``:
    recording N of the run's split (sorted by name)."""
    features = FeatureConfig(**meta["features"])
    lines = []
    for k, spec in enumerate(inputs):
        item = split_item(spec, ("train", "test"))
        if item:
            recs = _split(meta, item[0], args)
            if item[1] >= len(recs):
                raise ValueError(f"predict: {spec!r}: the {item[0]} split has {len(recs)} recordings "
                                 f"(0 to {len(recs) - 1})")
            rec = recs[item[1]]
            x, name = rec.samples, f"{spec} ({rec.name}, true label {meta['labels'][rec.digit]})"
        else:
            x, _ = read_wav(spec, sample_rate=features.sample_rate)
            name = spec
        f = log_mel(x, features)
        logits, attn = model(f[None], torch.tensor([f.shape[0]]), need_weights=True)
        prob = logits.softmax(-1)[0]
        lines.append(f"{name}: {meta['labels'][int(prob.argmax())]} (p={float(prob.max()):.3f})")
        if out_dir is not None:
            from ..viz.frame_attention import frame_attention_maps

            path = frame_attention_maps(f, torch.stack([a[0] for a in attn]), Path(out_dir) / f"attention_{k}.png",
                                        title=lines[-1], frames_per_step=model.config.subsample)
            lines.append(f"wrote {path}")
    return lines
