"""studies/repro_003_figures.py: the EMDs of Fig. 4, FP-DFSN similarity of Fig. 3 at β = 0, the subsample and the
document, on tiny synthetic data (no real prints, no model file)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from fedprint.data.stripes import stripe_records
from fedprint.privacy.fpdfsn import FPDFSNParams
from studies import repro_003_figures as rf


def _embed(images, dpis) -> np.ndarray:
    """Stand-in for the model: unit-norm 16-D vector of 4x4 block means (a function of the image only)."""
    rows = []
    for im in images:
        h, w = (im.shape[0] // 4) * 4, (im.shape[1] // 4) * 4
        v = im[:h, :w].astype(float).reshape(4, h // 4, 4, w // 4).mean(axis=(1, 3)).ravel() + 1.0
        rows.append(v / np.linalg.norm(v))
    return np.array(rows)


def test_exact_emd_is_zero_on_itself_symmetric_and_a_translation_moves_it_by_its_length():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(12, 5)), rng.normal(size=(7, 5)) + 0.3
    assert rf.emd_exact(x, x) == pytest.approx(0.0, abs=1e-9)
    assert rf.emd_exact(x, y) == pytest.approx(rf.emd_exact(y, x), rel=1e-7)
    t = np.array([3.0, 4.0, 0, 0, 0])  # W1(P, P + t) = |t| = 5 (the translation coupling; the dual <x, t>/|t|)
    assert rf.emd_exact(x, x + t) == pytest.approx(5.0, rel=1e-7)


def test_exact_emd_in_one_dimension_is_scipys_wasserstein_distance():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=9), rng.exponential(size=14)  # unequal sizes: a true transport plan, not a matching
    assert rf.emd_exact(a[:, None], b[:, None]) == pytest.approx(wasserstein_distance(a, b), rel=1e-7)
    assert rf.emd_mean_1d(np.c_[a, 2 * a], np.c_[b, 2 * b]) == pytest.approx(1.5 * wasserstein_distance(a, b))


def test_emd_matrix_is_symmetric_with_a_zero_diagonal_and_split_halves_on_it_when_given():
    rng = np.random.default_rng(2)
    clouds = [rng.normal(size=(6, 3)) + k for k in range(3)]
    m = rf.emd_matrix(clouds, rf.emd_mean_1d)
    assert np.allclose(m, m.T) and np.allclose(np.diag(m), 0.0) and (m[~np.eye(3, dtype=bool)] > 0).all()
    halves = [(c[:3], c[3:]) for c in clouds[:2]] + [None]
    mh = rf.emd_matrix(clouds, rf.emd_mean_1d, halves)
    assert mh[0, 0] == pytest.approx(rf.emd_mean_1d(clouds[0][:3], clouds[0][3:])) and np.isnan(mh[2, 2])


def test_permutation_null_of_two_far_apart_clouds_stays_below_their_emd():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(8, 4)), rng.normal(size=(8, 4)) + 5.0
    ids = [f"f{i // 2}" for i in range(8)]
    null = rf.permutation_null(a, ids, b, ids, rf.emd_exact, rng, reps=9)
    assert len(null) == 9 and max(null) < rf.emd_exact(a, b)


def test_fpdfsn_at_beta_zero_leaves_the_print_and_its_embedding_unchanged():
    recs = stripe_records(n_fingers=2, n_impressions=1, size=64)
    images, dpis = [r.image for r in recs], [r.dpi for r in recs]
    out = rf.fpdfsn_similarities(images, dpis, FPDFSNParams(beta=0.0), np.random.default_rng(), _embed,
                                 with_lpips=False)
    assert out["cosine"] == pytest.approx([1.0, 1.0]) and out["distance"] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert out["ssim"] == pytest.approx([1.0, 1.0]) and out["psnr"] == [float("inf")] * 2
    half = rf.fpdfsn_similarities(images, dpis, FPDFSNParams(beta=0.5), np.random.default_rng(), _embed,
                                  with_lpips=False)
    # β = 0.5 halves the gray levels; dividing by (1 − β) undoes that outside the noise disks
    assert all(s < 0.99 for s in half["ssim"])
    assert all(v > s for v, s in zip(half["ssim_inverted"], half["ssim"], strict=True))


def test_subsample_draws_whole_fingers_per_pass_and_is_deterministic():
    recs = stripe_records(n_fingers=3, n_impressions=4, size=16)
    one = rf.subsample(recs, 8, np.random.default_rng(5), per_finger=2)
    again = rf.subsample(recs, 8, np.random.default_rng(5), per_finger=2)
    assert [r.key for r in one] == [r.key for r in again] and len(one) == 8
    assert sorted(r.impression for r in one[:6]) == [0, 0, 0, 1, 1, 1]  # first pass: impressions 0-1 of each finger
    assert len(rf.subsample(recs, 0, np.random.default_rng(5), per_finger=1)) == 12


def test_fig4_runs_on_toy_sets_and_the_document_renders_it(tmp_path):
    sets = {"toy_a": stripe_records(n_fingers=4, n_impressions=2, size=32, domain="a", seed=0),
            "toy_b": stripe_records(n_fingers=3, n_impressions=2, size=32, domain="b", seed=1)}
    res = rf.run_fig4(sets, _embed, {"model": "stand-in", "threshold": None, "threshold_source": ""}, 0, 0, 4)
    m = np.asarray(res["emd_exact"])
    assert m.shape == (2, 2) and m[0, 1] == m[1, 0] > 0 and res["counts"]["toy_b"]["prints"] == 6
    (row,) = res["pairs"]
    assert 0 < row["emd_exact"]["p"] <= 1 and row["emd_exact"]["null"]["n"] == 4
    res.update(seconds=0.0, seed=0, max_prints=0)
    (tmp_path / "003_fig4.json").write_text(json.dumps(res))
    text = rf.render_doc(tmp_path).read_text()
    assert "toy_a – toy_b" in text and "Not yet run: `python -m studies.repro_003_figures --only fig3`" in text
    assert "Not yet run: `python -m studies.repro_003_figures --only fig6`" in text
