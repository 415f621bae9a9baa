"""Pathfinder: the label says whether the two dots are ends of one curve; curves never touch."""

import numpy as np
import pytest

from attnkit.data import pathfinder as P


def _components(img: np.ndarray) -> np.ndarray:
    """4-connected components of the inked pixels (a flood fill, no scipy)."""
    lab = np.zeros(img.shape, int)
    n = 0
    for y, x in zip(*np.nonzero(img)):
        if lab[y, x]:
            continue
        n += 1
        stack = [(y, x)]
        lab[y, x] = n
        while stack:
            cy, cx = stack.pop()
            for ny, nx in ((cy + 1, cx), (cy - 1, cx), (cy, cx + 1), (cy, cx - 1)):
                if 0 <= ny < img.shape[0] and 0 <= nx < img.shape[1] and img[ny, nx] and not lab[ny, nx]:
                    lab[ny, nx] = n
                    stack.append((ny, nx))
    return lab


def test_solid_curves_connected_iff_label():
    """Without gaps each curve is one blob: a flood fill from one dot reaches the other exactly when the
    label says connected (so curves never touch and the dots sit on the right curves)."""
    cfg = P.PathfinderConfig(paddle_gap=0.01, seed=5)
    rng = np.random.default_rng(0)
    for i in range(24):
        img, info = P._image(rng, i % 2 == 0, cfg)
        lab = _components(img > 60)
        (x0, y0), (x1, y1) = info["dots"]
        a, b = lab[int(y0), int(x0)], lab[int(y1), int(x1)]
        assert a and b
        assert (a == b) == (i % 2 == 0)


def test_dashed_curves_have_gaps_and_labels_balance():
    cfg = P.PathfinderConfig(n_train=40, n_val=4, n_test=4, seed=1)
    splits = P.generate_pathfinder(cfg)
    images, labels = splits["train"]
    assert images.shape == (40, 32, 32) and images.dtype == np.uint8 and labels.sum() == 20
    rng = np.random.default_rng(3)
    img, _ = P._image(rng, True, cfg)
    assert len(np.unique(_components(img > 60))) > 2 + 5  # dashes: many pieces per curve
    again = P.generate_pathfinder(cfg)
    assert all(np.array_equal(splits[k][0], again[k][0]) for k in splits)


def test_files_round_trip(tmp_path):
    cfg = P.PathfinderConfig(n_train=6, n_val=2, n_test=2)
    paths = P.write_pathfinder(P.generate_pathfinder(cfg), tmp_path)
    images, labels = P.read_pathfinder(paths[0])
    assert images.shape == (6, 32, 32) and set(labels.tolist()) <= {0, 1}
    np.savez(tmp_path / "bad.npz", images=np.zeros((2, 4, 4), np.float32), labels=np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="expected uint8"):
        P.read_pathfinder(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError, match="lra generate pathfinder"):
        P.read_pathfinder(tmp_path / "missing.npz")


@pytest.mark.parametrize("kw, message", [
    ({"contour_length": 40}, "more than 3 x size"),
    ({"size": 4}, "size"),
    ({"min_distance": 0.5}, "must exceed"),
    ({"continuity": 200.0}, "continuity"),
])
def test_impossible_settings_rejected(kw, message):
    with pytest.raises(ValueError, match=message):
        P.PathfinderConfig(**kw)


def test_crowded_image_gives_up_clearly():
    cfg = P.PathfinderConfig(size=12, contour_length=4, num_distractors=8, n_train=1, n_val=1, n_test=1)
    with pytest.raises(ValueError, match="could not place 10 curves"):
        P.generate_pathfinder(cfg)
