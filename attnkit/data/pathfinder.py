"""Pathfinder (Linsley et al. 2018; LRA's 32x32 version): are the two dots joined by one dashed curve?

An image holds two main curves and a few shorter distractors, each a chain of straight dashes
("paddles") with gaps between them, turning by at most ``continuity`` degrees from one paddle to
the next. Two dots mark curve ends: both ends of the same main curve (label 1, connected) or one end
of each main curve (label 0). Positive and negative images are drawn the same way (two main curves,
the same distractors, two dots); only where the second dot sits differs. With ``match_distance`` (the
default) the second main curve is placed with an end exactly as far from the first dot as the first curve's
other end, and a negative's second dot sits there: the two dots are equally far apart in both classes, so the
label is in the path, not in the distance (without it, a band of distances alone scores 96% at 16x16).
Curves keep at least
``min_distance`` pixels from each other and from themselves (beyond neighbouring paddles), and
``min_distance + dot_radius`` from the four main-curve ends where dots may sit, so no curve or dot
touches another curve and the gaps inside a curve are the only breaks. Lines are anti-aliased, 8-bit.
Labels are balanced by construction (every other image is positive, then the splits are shuffled).

As a sequence the image is its 1,024 pixels row by row (``pixel_tokens``). Files: ``pathfinder_{train,
val,test}.npz`` with ``images`` (N, size, size) uint8 and ``labels`` (N,) uint8, read with
``allow_pickle=False``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..nn.limits import SEED, check_fields, check_memory, floats, ints
from .npzfile import read_npz, write_splits

__all__ = ["PathfinderConfig", "generate_pathfinder", "draw_pathfinder", "write_pathfinder", "read_pathfinder",
           "PATHFINDER_FILES"]

PATHFINDER_FILES = {"train": "pathfinder_train.npz", "val": "pathfinder_val.npz", "test": "pathfinder_test.npz"}
_ATTEMPTS = 100  # fresh starts per image before the settings are declared impossible
COUNT = ints(1, 10**7)  # images per split
PIXELS = floats(0, 1024, open_low=True)  # lengths in pixels


@dataclass(frozen=True)
class PathfinderConfig:
    """Generator settings (pixels and degrees). The defaults give LRA-like 32x32 images."""

    size: int = field(default=32, metadata={"help": "image side in pixels (LRA's Pathfinder-32: 32)",
                                            "range": ints(8, 1024)})
    contour_length: int = field(default=6, metadata={"help": "paddles (dashes) of each of the two main curves",
                                                     "range": ints(1, 1000)})
    distractor_length: int = field(default=3, metadata={"help": "paddles of each distractor curve",
                                                        "range": ints(1, 1000)})
    num_distractors: int = field(default=3, metadata={"help": "curves without dots", "range": ints(0, 1000)})
    paddle_length: float = field(default=3.0, metadata={"help": "length of a dash in pixels", "range": PIXELS})
    paddle_gap: float = field(default=2.0, metadata={"help": "gap between dashes in pixels", "range": PIXELS})
    continuity: float = field(default=30.0, metadata={"help": "largest turn between consecutive dashes, degrees",
                                                      "range": floats(0, 180)})
    min_distance: float = field(default=2.5, metadata={
        "help": "pixels between different curves, and between non-neighbouring parts of one", "range": PIXELS})
    thickness: float = field(default=1.0, metadata={"help": "line width in pixels", "range": PIXELS})
    dot_radius: float = field(default=1.5, metadata={"help": "radius of the two dots in pixels", "range": PIXELS})
    match_distance: bool = field(default=True, metadata={
        "help": "place the second main curve with one end as far from the first dot as the first curve's other end, "
                "so the two dots are as far apart in negatives as in positives (without it the distance alone "
                "gives the label: 96% at 16x16, 89% at 32x32)"})
    n_train: int = field(default=20_000, metadata={"help": "training images", "range": COUNT})
    n_val: int = field(default=2_000, metadata={"help": "validation images", "range": COUNT})
    n_test: int = field(default=2_000, metadata={"help": "test images", "range": COUNT})
    seed: int = field(default=0, metadata={"help": "seed of the generator: the same seed writes the same files",
                                           "range": SEED})

    def __post_init__(self):
        check_fields(self, "pathfinder")
        reach = self.contour_length * (self.paddle_length + self.paddle_gap)
        if reach > 3 * self.size:
            raise ValueError(f"pathfinder: a main curve of {self.contour_length} paddles is {reach:.0f} px long, more "
                             f"than 3 x size={self.size} can hold; shorten it or enlarge the image")
        if self.min_distance <= self.thickness:
            raise ValueError(f"pathfinder: `min_distance` ({self.min_distance}) must exceed `thickness` "
                             f"({self.thickness}) or separate curves could touch")


def _points(segments: np.ndarray, step: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Segments (..., S, 2, 2) of one length -> sample points (..., S * k, 2) at most ``step`` apart, and
    the segment index of each (S * k,)."""
    a, b = segments[..., 0, :], segments[..., 1, :]  # (..., S, 2)
    length = float(np.linalg.norm(b.reshape(-1, 2)[0] - a.reshape(-1, 2)[0])) if a.size else 0.0
    k = max(2, int(math.ceil(length / step)) + 1)
    t = np.linspace(0.0, 1.0, k)[:, None]  # (k, 1)
    pts = a[..., None, :] + t * (b - a)[..., None, :]  # (..., S, k, 2)
    return pts.reshape(*pts.shape[:-3], -1, 2), np.repeat(np.arange(segments.shape[-3]), k)


def _shapes(rng: np.random.Generator, n: int, cfg: PathfinderConfig, count: int) -> np.ndarray:
    """``count`` curves of ``n`` paddles from the origin, (count, n, 2, 2) segment ends (x, y), keeping
    only those that never come back within ``min_distance`` of themselves: (<= count, n, 2, 2)."""
    turns = rng.uniform(-1.0, 1.0, (count, n)) * math.radians(cfg.continuity)
    turns[:, 0] = rng.uniform(0.0, 2 * math.pi, count)  # the first paddle's direction
    angles = np.cumsum(turns, 1)  # (count, n) direction of each paddle
    d = np.stack([np.cos(angles), np.sin(angles)], -1)  # (count, n, 2)
    step = cfg.paddle_length + cfg.paddle_gap
    starts = np.concatenate([np.zeros((count, 1, 2)), np.cumsum(d[:, :-1] * step, 1)], 1)  # (count, n, 2)
    segs = np.stack([starts, starts + cfg.paddle_length * d], 2)  # (count, n, 2, 2)
    pts, idx = _points(segs)  # (count, P, 2), (P,)
    far = np.abs(idx[:, None] - idx[None]) > 1  # (P, P): points of non-neighbouring paddles
    if not far.any():
        return segs
    dist = np.linalg.norm(pts[:, :, None] - pts[:, None], axis=-1)  # (count, P, P)
    return segs[np.where(far, dist, np.inf).min((1, 2)) >= cfg.min_distance]


def _clear(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Smallest distance from each of a (..., P, 2)'s point sets to the points b (T, 2): (...,); inf if b is empty."""
    if not len(b):
        return np.full(a.shape[:-2], np.inf)
    return np.linalg.norm(a[..., :, None, :] - b, axis=-1).min((-1, -2))


def _curve(rng: np.random.Generator, n: int, cfg: PathfinderConfig, taken: np.ndarray, ends: np.ndarray,
           main: bool, anchor: tuple[np.ndarray, float] | None = None) -> np.ndarray | None:
    """One curve of ``n`` paddles inside the image, ``min_distance`` from the ``taken`` points and
    ``min_distance + dot_radius`` from the main curves' ``ends`` (where dots may sit); a ``main`` curve's
    own ends keep that clearance from everything too. ``anchor`` (point, radius): the curve's last end
    lies on that circle. None if none was found."""
    margin = cfg.dot_radius + 1.0
    for _ in range(4 if anchor is None else 16):
        segs = _shapes(rng, n, cfg, 16)  # (c, n, 2, 2)
        lo, hi = segs.min((1, 2)), segs.max((1, 2))  # (c, 2)
        segs, lo, hi = (x[np.all(hi - lo <= cfg.size - 2 * margin, -1)] for x in (segs, lo, hi))
        if not len(segs):
            continue
        if anchor is None:
            shifts = rng.uniform(margin - lo[:, None], cfg.size - margin - hi[:, None], (len(segs), 10, 2))  # inside
            inside = np.ones(shifts.shape[:2], bool)  # (c, 10)
        else:
            theta = rng.uniform(0.0, 2 * math.pi, (len(segs), 10))
            on_circle = anchor[0] + anchor[1] * np.stack([np.cos(theta), np.sin(theta)], -1)  # (c, 10, 2)
            shifts = on_circle - segs[:, None, -1, 1]  # (c, 10, 2): moves the last end onto the circle
            inside = np.all((lo[:, None] + shifts >= margin) & (hi[:, None] + shifts <= cfg.size - margin), -1)
        pts = _points(segs)[0]  # (c, P, 2)
        wide = cfg.min_distance + cfg.dot_radius
        for c in range(len(segs)):
            if not inside[c].any():
                continue
            placed = pts[c, None] + shifts[c, :, None]  # (10, P, 2)
            ok = inside[c] & (_clear(placed, taken) >= cfg.min_distance) & (_clear(placed, ends) >= wide)  # (10,)
            if main:
                tips = np.stack([segs[c, 0, 0], segs[c, -1, 1]])[None] + shifts[c, :, None]  # (10, 2, 2)
                ok &= _clear(tips, taken) >= wide
            fits = np.flatnonzero(ok)
            if len(fits):
                return segs[c] + shifts[c, fits[0]]
    return None


def draw_pathfinder(curves: list[np.ndarray], dots: list[np.ndarray], cfg: PathfinderConfig) -> np.ndarray:
    """Render segments and dots, anti-aliased: (size, size) uint8."""
    yy, xx = np.mgrid[0:cfg.size, 0:cfg.size]
    px = np.stack([xx.ravel() + 0.5, yy.ravel() + 0.5], -1)[:, None]  # pixel centres (P, 1, 2)
    segs = np.concatenate(curves)  # (S, 2, 2)
    a, ab = segs[:, 0], segs[:, 1] - segs[:, 0]  # (S, 2)
    t = np.clip(((px - a) * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-12), 0.0, 1.0)  # (P, S)
    to_line = np.linalg.norm(px - (a + t[..., None] * ab), axis=-1).min(-1)  # (P,) distance to the nearest paddle
    to_dot = np.linalg.norm(px - np.asarray(dots), axis=-1).min(-1)  # (P,)
    ink = np.maximum(np.clip(cfg.thickness / 2 + 0.5 - to_line, 0.0, 1.0),
                     np.clip(cfg.dot_radius + 0.5 - to_dot, 0.0, 1.0))
    return np.round(ink * 255).astype(np.uint8).reshape(cfg.size, cfg.size)


def _image(rng: np.random.Generator, positive: bool, cfg: PathfinderConfig) -> tuple[np.ndarray, dict]:
    """One image and its curves / dots (for tests)."""
    for _ in range(_ATTEMPTS):
        curves: list[np.ndarray] = []
        taken, ends = np.zeros((0, 2)), np.zeros((0, 2))
        for k, n in enumerate([cfg.contour_length] * 2 + [cfg.distractor_length] * cfg.num_distractors):
            anchor = None
            if k == 1 and cfg.match_distance:  # b's last end as far from a's start as a's last end
                anchor = (curves[0][0, 0], float(np.linalg.norm(curves[0][-1, 1] - curves[0][0, 0])))
            segs = _curve(rng, n, cfg, taken, ends, main=k < 2, anchor=anchor)
            if segs is None:
                break
            curves.append(segs)
            taken = np.concatenate([taken, _points(segs)[0]])
            if k < 2:  # every end of a main curve may get a dot, whatever the label
                ends = np.concatenate([ends, segs[0, 0][None], segs[-1, 1][None]])
        else:
            a, b = curves[0], curves[1]
            ends_b = [b[0, 0], b[-1, 1]]
            if positive:
                second = a[-1, 1]
            else:  # with match_distance, the end of b as far from the first dot as a's last end
                second = b[-1, 1] if cfg.match_distance else ends_b[int(rng.integers(2))]
            dots = [a[0, 0], second]
            return draw_pathfinder(curves, dots, cfg), {"curves": curves, "dots": dots}
    raise ValueError(f"pathfinder: could not place {2 + cfg.num_distractors} curves apart from each other in a "
                     f"{cfg.size}x{cfg.size} image after {_ATTEMPTS} tries; use fewer or shorter curves, a "
                     f"smaller min_distance, or a larger image")


def generate_pathfinder(cfg: PathfinderConfig) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"train", "val", "test"}: (images (N, size, size) uint8, labels (N,) uint8), balanced, seeded."""
    total = cfg.n_train + cfg.n_val + cfg.n_test
    what = f"pathfinder: generating {total:,} images of {cfg.size}x{cfg.size}"
    check_memory(2 * total * cfg.size**2, what)  # the list of images and their stack
    rng = np.random.default_rng(cfg.seed)
    out = {}
    for split, n in (("train", cfg.n_train), ("val", cfg.n_val), ("test", cfg.n_test)):
        labels = (np.arange(n) % 2 == 0).astype(np.uint8)
        rng.shuffle(labels)
        images = np.stack([_image(rng, bool(y), cfg)[0] for y in labels]) if n else np.zeros((0, cfg.size, cfg.size),
                                                                                              np.uint8)
        out[split] = (images, labels)
    return out


def write_pathfinder(splits: dict[str, tuple[np.ndarray, np.ndarray]], out_dir: str | os.PathLike) -> list[Path]:
    """Write ``pathfinder_{train,val,test}.npz`` into ``out_dir`` (each atomically); returns their paths."""
    return write_splits(splits, out_dir, PATHFINDER_FILES, ("images", "labels"))


def read_pathfinder(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, S, S) uint8, labels (N,) uint8) from a ``write_pathfinder`` file (no pickle)."""
    images, labels = read_npz(path, ("images", "labels"), what="pathfinder",
                              missing="create it with `attnkit lra generate pathfinder`")
    if images.dtype != np.uint8 or images.ndim != 3 or labels.shape != images.shape[:1]:
        raise ValueError(f"pathfinder: {path} holds images {images.dtype}{images.shape} and labels {labels.shape}; "
                         f"expected uint8 (N, S, S) and (N,)")
    if labels.size and labels.max() > 1:
        raise ValueError(f"pathfinder: {path} has labels other than 0 / 1")
    return images, labels
