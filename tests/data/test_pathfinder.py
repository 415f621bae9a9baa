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
    cfg = P.PathfinderConfig(n_train=20, n_val=4, n_test=4, seed=1)
    splits = P.generate_pathfinder(cfg)
    images, labels = splits["train"]
    assert images.shape == (20, 32, 32) and images.dtype == np.uint8 and labels.sum() == 10
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


def _dot_distances(cfg: P.PathfinderConfig, n: int) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    rng = np.random.default_rng(7)
    infos = [P._image(rng, i % 2 == 0, cfg)[1] for i in range(n)]
    dist = np.array([np.linalg.norm(np.subtract(*info["dots"])) for info in infos])
    return dist, np.arange(n) % 2 == 0, infos


def test_matched_distance_hides_the_label_from_the_dots_distance(bench_script):
    """Pathfinder-16's curves: without matching, a band of dot distances nearly gives the label; with it (the
    default) both classes put the second dot exactly as far from the first as the first curve's other end."""
    small = dict(size=16, contour_length=3, distractor_length=2, num_distractors=1, paddle_length=2.5,
                 paddle_gap=1.5, min_distance=2.0, dot_radius=1.0)
    band_accuracy = bench_script("pathfinder_baselines").band_rule  # the band chosen on half, scored on the rest
    dist, positive, infos = _dot_distances(P.PathfinderConfig(**small), 240)
    for info, d in zip(infos, dist):
        a, b = info["curves"][:2]
        assert abs(np.linalg.norm(a[-1, 1] - a[0, 0]) - d) < 1e-9  # as far as a's own ends
        assert abs(np.linalg.norm(b[-1, 1] - a[0, 0]) - d) < 1e-9  # b's last end on the same circle
    assert band_accuracy(dist, positive)[2] < 0.65
    dist, positive, _ = _dot_distances(P.PathfinderConfig(**small, match_distance=False), 240)
    assert band_accuracy(dist, positive)[2] > 0.85

