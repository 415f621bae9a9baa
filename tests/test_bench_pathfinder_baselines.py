"""bench/pathfinder_baselines.py: the dots' distance rule and the small CNN reference."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attnkit.data import pathfinder as P
from attnkit.lra.settings import SUITES
from attnkit.lra.tasks import pathfinder_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pb(bench_script):
    return bench_script("pathfinder_baselines")


def test_band_rule_finds_the_band_and_scores_the_other_half(pb):
    dist = np.array([1.0, 5.0, 2.0, 6.0] * 10)  # positives at 1-2, negatives at 5-6
    positive = np.array([True, False] * 20)
    lo, hi, acc = pb.band_rule(dist, positive)
    assert lo <= 1.0 and 2.0 <= hi < 5.0 and acc == 1.0
    positive[20:] = ~positive[20:]  # the second half says the opposite
    assert pb.band_rule(dist, positive)[2] == 0.0


def test_cnn_maps_images_to_two_scores(pb):
    assert pb.small_cnn(8)(torch.zeros(3, 1, 16, 16)).shape == (3, 2)


def test_script_prints_both_rules_and_the_cnn(tmp_path):
    cfg = pathfinder_config(16, SUITES["full"]["pathfinder"].replace(n_train=16, n_val=8, n_test=8), 0)
    P.write_pathfinder(P.generate_pathfinder(cfg), tmp_path)
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "pathfinder_baselines.py"), "--images", "40",
                          "--data-dir", str(tmp_path), "--steps", "2", "--batch-size", "4", "--threads", "1"],
                         capture_output=True, text=True, check=True).stdout
    assert "(match_distance True) |" in out and "(match_distance False) |" in out
    assert "| small CNN, 2 steps of 4 on 16 images" in out
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "pathfinder_baselines.py"), "--data-dir",
                          str(tmp_path / "none")], capture_output=True, text=True)
    assert bad.returncode == 2 and "--data-dir:" in bad.stderr
