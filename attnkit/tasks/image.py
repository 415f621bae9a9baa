"""Images as vector sets: scikit-learn digits (embedded) or MNIST, pixels or ViT patches + class token."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import Tensor

from ..data.images import load_digits, load_mnist
from ..models.vision import VisionConfig, VisionTransformer
from ..nn import TransformerConfig
from ..train import Task
from ..train.from_meta import listed, model_from_meta
from .options import split_item
from .options.image import NAME

PATCHES = {"digits": 2, "mnist": 4}


def load_splits(dataset: str, path: Path | None = None, download: bool = False, limit: int | None = None,
                root: Path | None = None):
    if dataset == "digits":
        return load_digits()
    return load_mnist(path, download=download, limit=limit, root=root)


def random_shift(images: Tensor, max_shift: int) -> Tensor:
    """Translate each image by up to ``max_shift`` pixels in x and y, filling with the border value."""
    if max_shift <= 0:
        return images
    b, c, h, w = images.shape
    s = max_shift
    padded = torch.nn.functional.pad(images, (s, s, s, s), mode="replicate")  # (B, C, H + 2s, W + 2s)
    dy, dx = torch.randint(0, 2 * s + 1, (2, b)).tolist()
    return torch.stack([padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(b)])


def collate(examples):
    return torch.stack([e[0] for e in examples]), torch.tensor([e[1] for e in examples])


def make_forward(shift: int):
    def forward(model, batch):
        images, labels = batch
        if model.training and shift:
            images = random_shift(images, shift)
        return model(images), labels

    return forward


def build(args: argparse.Namespace, encoder: TransformerConfig, seed: int = 0) -> Task:
    splits = load_splits(args.dataset, args.train, args.download, args.limit, getattr(args, "data_dir", None))
    img, _ = splits["train"][0]
    patch = args.patch_size or PATCHES[args.dataset]
    c, h, w = img.shape
    n_tokens = (h * w) if args.mode == "pixels" else (h // patch) * (w // patch)
    enc = encoder.replace(positional="learned", max_len=n_tokens + 1)
    cfg = VisionConfig(height=h, width=w, channels=c, num_classes=len(splits["train"].classes), mode=args.mode,
                       patch_size=patch, encoder=enc)
    torch.manual_seed(seed)
    model = VisionTransformer(cfg)
    meta = {"model": cfg.to_dict(), "labels": splits["train"].classes, "dataset": args.dataset}
    return Task(NAME, model, splits["train"], collate, make_forward(args.shift), dev=splits["dev"],
                test=splits["test"], meta=meta)


def load(folder: Path, meta: dict) -> VisionTransformer:
    model = model_from_meta(folder, meta, lambda: VisionTransformer(VisionConfig.from_dict(meta["model"])))
    listed(folder, meta, "labels", model.config.num_classes)
    return model.eval()


def task_for(model, meta: dict, args=None) -> Task:
    return Task(NAME, model, [None], collate, make_forward(0), meta=meta)


def _splits(meta: dict, folder=None, args=None):
    return load_splits(meta.get("dataset", "digits"), folder, getattr(args, "download", False),
                       root=getattr(args, "data_dir", None))


def evaluation_data(meta: dict, path: str | None, args=None):
    """``--data test`` / ``dev`` picks a split of the checkpoint's dataset; for mnist a folder also works."""
    split = path if path in ("train", "dev", "test") else "test"
    folder = Path(path) if path not in (None, "train", "dev", "test") else None
    return _splits(meta, folder, args)[split]


def _read_image(spec: str, meta: dict, args=None) -> tuple[Tensor, str]:
    """``test:N`` = image N of the checkpoint dataset's test split; else a PNG / JPG file."""
    cfg = VisionConfig.from_dict(meta["model"])
    item = split_item(spec)
    if item:
        split, i = item
        data = _splits(meta, args=args)[split]
        if i >= len(data):
            raise ValueError(f"predict: {spec!r}: the {split} split has {len(data)} images (0 to {len(data) - 1})")
        x, y = data[i]
        return x, f"{spec} (true label {meta['labels'][y]})"
    from ..viz.figure import pyplot

    try:
        arr = torch.tensor(pyplot().imread(spec), dtype=torch.float32)
    except (OSError, ValueError) as e:
        raise ValueError(f"predict: cannot read image {spec!r}: {e}") from None
    if arr.dim() == 3:
        arr = arr[..., :3].mean(-1)  # to grey
    arr = 1.0 - arr if arr.mean() > 0.5 else arr  # dark digit on light paper -> ink = high values
    x = torch.nn.functional.interpolate(arr[None, None], size=(cfg.height, cfg.width), mode="area")[0]
    if meta.get("dataset") == "mnist":
        from ..data.images import MNIST_MEAN, MNIST_STD

        x = (x - MNIST_MEAN) / MNIST_STD
    return x.expand(cfg.channels, -1, -1), spec


@torch.no_grad()
def predict(model: VisionTransformer, meta: dict, inputs: list[str], out_dir: Path | None, args=None) -> list[str]:
    """Each input is an image file (PNG, JPG) or ``train:N`` / ``dev:N`` / ``test:N`` of the run's dataset."""
    lines = []
    for k, spec in enumerate(inputs):
        x, name = _read_image(spec, meta, args)
        logits, attn = model(x[None], need_weights=True)
        prob = logits.softmax(-1)[0]
        label = meta["labels"][int(prob.argmax())]
        lines.append(f"{name}: {label} (p={float(prob.max()):.3f})")
        if out_dir is not None:
            from ..viz.image_attention import class_token_maps

            path = class_token_maps(x, torch.stack([a[0] for a in attn]), model.config,
                                    Path(out_dir) / f"attention_{k}.png", title=f"{name} -> {label}")
            lines.append(f"wrote {path}")
    return lines
