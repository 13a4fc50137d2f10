"""studies/study_errors.py: ridge-area centroids, the operating threshold and the error summary's arithmetic."""

from __future__ import annotations

import numpy as np
import torch

from fedprint.data.pairs import PairSet
from fedprint.models.metrics import threshold_at_fmr
from studies.study_errors import error_summary, main, montage, ridge_centroids


def test_ridge_centroid_finds_a_striped_patch_on_a_flat_background():
    img = torch.zeros(2, 1, 96, 96)
    stripes = torch.sin(torch.arange(32.0) * 1.3).view(1, -1).expand(32, 32)
    img[0, 0, 10:42, 50:82] = stripes  # centre (25.5, 65.5)
    img[1, 0, 60:92, 5:37] = stripes  # centre (75.5, 20.5)
    cy, cx = ridge_centroids(img)
    np.testing.assert_allclose(cy, [25.5, 75.5], atol=3)
    np.testing.assert_allclose(cx, [65.5, 20.5], atol=3)


def test_threshold_lets_through_at_most_the_asked_share_of_impostors():
    rng = np.random.default_rng(0)
    s, y = rng.normal(size=1000), np.r_[np.zeros(900, int), np.ones(100, int)]
    for fmr in (0.0, 0.01, 0.05, 0.5):
        thr = threshold_at_fmr(s, y, fmr, higher_is_genuine=True)["threshold"]  # the one study_errors uses
        assert (s[y == 0] >= thr).mean() <= fmr
        assert (s[y == 0] >= np.nextafter(thr, -np.inf) - 1e-9).mean() > fmr - 1 / 900  # and no stricter


def test_error_summary_counts_failures_shared_images_and_same_person_impostors():
    # prints 0, 1: finger p1_a; 2: p1_b (same person); 3, 4: p2_a. Genuine (0, 1) fails, (3, 4) passes.
    pairs = PairSet(np.array([0, 3, 0, 0, 1]), np.array([1, 4, 2, 3, 3]), np.array([1, 1, 0, 0, 0]))
    scores = np.array([0.05, 0.95, 0.9, 0.1, 0.0])  # at FMR 1/3 only the same-person impostor passes
    cy, cx = np.array([0.0, 30.0, 0.0, 5.0, 5.0]), np.zeros(5)
    s = error_summary(scores, pairs, ["p1_a", "p1_a", "p1_b", "p2_a", "p2_a"], cy, cx, fmr=0.34)
    assert (s["genuine"], s["impostor"], s["failing"]) == (2, 3, 1)
    assert dict(s["shared"]) == {0: 1, 1: 1}
    assert (s["dy_fail"], s["dy_pass"]) == (30.0, 0.0)
    assert s["corr_dy"] == -1.0
    assert (s["same_person"], s["above"], s["same_person_above"]) == (1, 1, 1)


def test_montage_lays_out_pairs_in_lines():
    img = torch.rand(4, 1, 8, 8)
    pairs = PairSet(np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([1, 0, 0]))
    pic = montage(img, pairs, np.array([0, 1, 2]), per_line=2)
    assert pic.dtype == np.uint8 and pic.shape == (16, 2 * (8 + 4 + 8 + 12))


def test_bad_options_and_a_missing_run_are_named(tmp_path, capsys):
    assert main(["--run", "x", "--out", str(tmp_path / "o"), "--fmr", "2"]) == 2
    assert "--fmr" in capsys.readouterr().err
    assert main(["--run", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "model_centralized.pt" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
