"""``DataSizeConfig``, the data-size experiment's settings, and ``QUICK``, its ``--quick`` sizes, in a module
without torch: ``attnkit experiment data-size --help`` is built from their fields. ``attnkit.experiments.data_size``
runs the experiment."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...nn.limits import floats, ints
from .fields import check, lr_field, seeds_field, trained_field

__all__ = ["DataSizeConfig", "MODELS", "QUICK"]

MODELS = ("cnn", "vit", "window")


@dataclass(frozen=True)
class DataSizeConfig:
    """The data-size experiment: sizes, models, the budget per size and the learning rates."""

    sizes: tuple[int, ...] = field(default=(300, 1000, 3000, 10000, 30000, 55000), metadata={
        "help": "training-set sizes (images, at most 55000: MNIST's train split less its 5000 dev images)"})
    models: tuple[str, ...] = trained_field(MODELS)
    seeds: int = seeds_field("subset, initialisation, order")
    side: int = field(default=14, metadata={"help": "images are averaged down to side x side pixels (28 or 14)",
                                            "choices": (28, 14)})
    d_model: int = field(default=64, metadata={"help": "width of the attention models", "range": ints(4, 1024)})
    layers: int = field(default=2, metadata={"help": "encoder layers of the attention models", "range": ints(1, 12)})
    patch: int = field(default=2, metadata={"help": "ViT: side of a square patch in pixels", "range": ints(1, 14)})
    window_patch: int = field(default=2, metadata={
        "help": "window model: side of its square patches in pixels (1 = every pixel a vector)", "range": ints(1, 14)})
    window: int = field(default=0, metadata={
        "help": "window model: keys on each side in row-major order (0 = the grid's width + 1: the 3 x 3 "
                "neighbourhood)", "range": ints(0, 784)})
    dropout: float = field(default=0.1, metadata={"help": "dropout of the attention models (the CNN has none)",
                                                  "range": floats(0, 1, open_high=True)})
    batch_size: int = field(default=64, metadata={"help": "images per step", "range": ints(1, 4096)})
    epochs: float = field(default=20.0, metadata={
        "help": "budget: this many passes over the subset, clamped to [min_steps, max_steps] steps",
        "range": floats(0, 10**4, open_low=True)})
    min_steps: int = field(default=200, metadata={"help": "budget: fewest steps at any size", "range": ints(1, 10**6)})
    max_steps: int = field(default=400, metadata={"help": "budget: most steps at any size", "range": ints(1, 10**6)})
    cnn_lr: float = lr_field(3e-3, " for the CNN")
    attention_lr: float = lr_field(3e-3, " for the two attention models")
    test_images: int = field(default=10000, metadata={"help": "test images scored", "range": ints(1, 10000)})
    dev_images: int = field(default=1000, metadata={"help": "dev images scored (for choosing learning rates)",
                                                    "range": ints(1, 5000)})

    def __post_init__(self):
        check(self, whole={"sizes": (10, 55000)}, choices={"models": MODELS}, heads=4)
        if self.side not in (28, 14):
            raise ValueError(f"DataSizeConfig: `side` must be 28 or 14, got {self.side}")
        for name in ("patch", "window_patch"):
            if self.side % getattr(self, name):
                raise ValueError(f"DataSizeConfig: `{name}` {getattr(self, name)} does not divide the "
                                 f"{self.side}-pixel side")
        if self.min_steps > self.max_steps:
            raise ValueError(f"DataSizeConfig: `min_steps` {self.min_steps} > `max_steps` {self.max_steps}")

    @property
    def keys_each_side(self) -> int:
        return self.window or self.side // self.window_patch + 1


QUICK = DataSizeConfig(sizes=(100, 300), seeds=2, side=14, d_model=16, layers=1, batch_size=32, epochs=2.0,
                       min_steps=8, max_steps=12, test_images=300, dev_images=300)
