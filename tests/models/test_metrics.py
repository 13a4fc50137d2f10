"""Tests for models.metrics against hand-computed cases."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from fedprint.models.metrics import (
    choose_threshold,
    eer,
    fnmr_at_fmr,
    plot_roc,
    roc_auc,
    roc_curve,
    verification_metrics,
    write_roc_csv,
    zscore_fusion,
)

# Small known example (distances). Sorted: .1g .2g .3g .4i .5i .6g .7i .8i .9i
GEN = [0.1, 0.2, 0.3, 0.6]
IMP = [0.4, 0.5, 0.7, 0.8, 0.9]
SCORES = np.array(GEN + IMP)
LABELS = np.array([1] * 4 + [0] * 5)


def test_roc_curve_hand_example():
    roc = roc_curve(SCORES, LABELS)
    assert roc.thresholds[0] == -np.inf
    np.testing.assert_allclose(roc.thresholds[1:], np.sort(SCORES))
    np.testing.assert_allclose(roc.fmr, [0, 0, 0, 0, .2, .4, .4, .6, .8, 1])
    np.testing.assert_allclose(roc.fnmr, [1, .75, .5, .25, .25, .25, 0, 0, 0, 0])


def test_eer_fmr_auc_hand_example():
    # FNMR - FMR changes sign between t=.4 (FMR .2, FNMR .25) and t=.5 (FMR .4, FNMR .25): crossing at .25.
    assert eer(SCORES, LABELS) == pytest.approx(0.25)
    assert fnmr_at_fmr(SCORES, LABELS, 0.01) == pytest.approx(0.25)  # FMR100
    assert fnmr_at_fmr(SCORES, LABELS, 0.001) == pytest.approx(0.25)  # FMR1000
    assert fnmr_at_fmr(SCORES, LABELS, 0.4) == pytest.approx(0.0)
    # Mann-Whitney: 3 genuines below all 5 impostors + 0.6 below 3 impostors -> 18 of 20 pairs.
    assert roc_auc(SCORES, LABELS) == pytest.approx(18 / 20)


def test_perfect_and_reversed():
    s = np.array([0.1, 0.2, 0.3, 0.8, 0.9])
    lab = np.array([1, 1, 1, 0, 0])
    assert eer(s, lab) == 0.0 and roc_auc(s, lab) == 1.0 and fnmr_at_fmr(s, lab, 0.001) == 0.0
    assert roc_auc(s, 1 - lab) == 0.0 and eer(s, 1 - lab) == 1.0


def test_ties_count_half():
    s = np.array([0.5, 0.5, 0.5, 0.5])
    lab = np.array([1, 0, 1, 0])
    assert roc_auc(s, lab) == pytest.approx(0.5)
    assert eer(s, lab) == pytest.approx(0.5)
    assert len(roc_curve(s, lab).fmr) == 2  # accept-nothing and accept-all only


def test_higher_is_genuine_symmetry():
    sim = -SCORES
    assert eer(sim, LABELS, higher_is_genuine=True) == pytest.approx(eer(SCORES, LABELS))
    assert roc_auc(sim, LABELS, higher_is_genuine=True) == pytest.approx(roc_auc(SCORES, LABELS))
    assert fnmr_at_fmr(sim, LABELS, 0.01, True) == pytest.approx(fnmr_at_fmr(SCORES, LABELS, 0.01))
    t_d = choose_threshold(SCORES, LABELS)
    t_s = choose_threshold(sim, LABELS, higher_is_genuine=True)
    assert t_s == pytest.approx(-t_d)
    m_d = verification_metrics(SCORES, LABELS, t_d)
    m_s = verification_metrics(sim, LABELS, t_s, higher_is_genuine=True)
    assert {k: v for k, v in m_d.items() if k != "threshold"} == pytest.approx(
        {k: v for k, v in m_s.items() if k != "threshold"})
    # Treating distances as similarities flips the ranking.
    assert roc_auc(SCORES, LABELS, higher_is_genuine=True) == pytest.approx(1 - 18 / 20)


def test_choose_threshold_on_validation():
    # Accuracy: accept d <= .3 gives 8/9 (best); midpoint to the next score .4 -> .35.
    assert choose_threshold(SCORES, LABELS, "accuracy") == pytest.approx(0.35)
    # EER criterion: |FMR - FNMR| is smallest (.05) at t=.4; midpoint to .5 -> .45.
    assert choose_threshold(SCORES, LABELS, "eer") == pytest.approx(0.45)
    with pytest.raises(ValueError, match="criterion"):
        choose_threshold(SCORES, LABELS, "f1")


def test_threshold_from_validation_applied_to_test():
    t = choose_threshold(SCORES, LABELS)  # 0.35, from validation only
    test_s = np.array([0.34, 0.36, 0.2, 0.5, 0.30])
    test_l = np.array([1, 1, 1, 0, 0])
    m = verification_metrics(test_s, test_l, t)
    # accepted: .34 (g), .2 (g), .30 (i); rejected: .36 (g), .5 (i)
    assert m["threshold"] == pytest.approx(0.35)
    assert m["accuracy"] == pytest.approx(3 / 5)
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)
    assert m["fmr"] == pytest.approx(0.5) and m["fnmr"] == pytest.approx(1 / 3)
    assert m["n_genuine"] == 3 and m["n_impostor"] == 2
    assert m["roc_auc"] == pytest.approx(roc_auc(test_s, test_l))
    assert m["eer"] == pytest.approx(eer(test_s, test_l))
    for k in ("accuracy", "precision", "recall", "f1", "roc_auc", "eer", "fmr100", "fmr1000"):
        assert 0.0 <= m[k] <= 1.0


def test_threshold_extremes_and_no_accepts():
    # Every genuine scores worse than every impostor: the best-accuracy point is "accept nothing".
    s = np.array([0.9, 0.8, 0.1, 0.2, 0.3])
    lab = np.array([1, 1, 0, 0, 0])
    t = choose_threshold(s, lab)
    assert t < 0.1
    m = verification_metrics(s, lab, t)
    assert m["precision"] == 0.0 and m["f1"] == 0.0 and m["accuracy"] == pytest.approx(0.6)


@pytest.mark.parametrize("scores, labels, msg", [
    ([0.1, 0.2], [1], "same length"),
    ([0.1, 0.2], [1, 1], "both genuine and impostor"),
    ([0.1, 0.2], [0, 0], "both genuine and impostor"),
    ([], [], "at least one"),
    ([0.1, np.nan], [1, 0], "finite"),
    ([0.1, 0.2], [1, 2], "only 0"),
    ([[0.1, 0.2]], [[1, 0]], "1-D"),
])
def test_bad_inputs(scores, labels, msg):
    for fn in (roc_curve, eer, roc_auc, choose_threshold):
        with pytest.raises(ValueError, match=msg):
            fn(scores, labels)
    with pytest.raises(ValueError, match=msg):
        verification_metrics(scores, labels, 0.5)


def test_fnmr_at_fmr_bad_target():
    with pytest.raises(ValueError, match="fmr"):
        fnmr_at_fmr(SCORES, LABELS, 1.5)


def test_write_roc_csv(tmp_path):
    p = write_roc_csv(tmp_path / "sub" / "roc.csv", SCORES, LABELS)
    rows = list(csv.DictReader(p.open()))
    assert len(rows) == 10 and float(rows[0]["threshold"]) == -np.inf
    assert float(rows[4]["fmr"]) == pytest.approx(0.2) and float(rows[4]["tpr"]) == pytest.approx(0.75)


def test_plot_roc(tmp_path):
    rng = np.random.default_rng(0)
    lab = np.r_[np.ones(50), np.zeros(200)].astype(int)
    dist = np.r_[rng.normal(0.5, 0.2, 50), rng.normal(1.2, 0.2, 200)]
    sim = -dist + rng.normal(0, 0.1, 250)
    p = plot_roc(tmp_path / "roc.png", {"siamese": (dist, lab), "matcher": (sim, lab, True)})
    assert p.stat().st_size > 10_000 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="at least one"):
        plot_roc(tmp_path / "x.png", {})


def test_rank_fusion_averages_ranks_and_never_sees_labels():
    from fedprint.models.metrics import rank_fusion

    a = np.array([0.1, 0.9, 0.5, 0.5])
    b = np.array([3.0, 1.0, 2.0, 4.0])
    fused = rank_fusion(a, b)
    # ranks of a: 1, 4, 2.5, 2.5; of b: 3, 1, 2, 4 -> mean / n
    np.testing.assert_allclose(fused, np.array([2.0, 2.5, 2.25, 3.25]) / 4)
    assert np.array_equal(rank_fusion(a), np.array([1, 4, 2.5, 2.5]) / 4)
    # a perfect matcher fused with a useless one still ranks every genuine pair above every impostor
    y = np.array([1, 1, 0, 0])
    assert eer(rank_fusion(np.array([0.9, 0.8, 0.2, 0.1]), np.array([0.5, 0.5, 0.5, 0.5])), y,
               higher_is_genuine=True) == 0.0
    with pytest.raises(ValueError, match="same length"):
        rank_fusion(a, b[:3])


def test_zscore_fusion_uses_only_the_reference_scores():
    ref = [np.array([0.0, 2.0]), np.array([10.0, 30.0])]
    fused = zscore_fusion(ref, [np.array([1.0, 3.0]), np.array([20.0, 40.0])])
    np.testing.assert_allclose(fused, [0.0, 4.0])  # (s - mean) / std of each reference, summed
    with pytest.raises(ValueError, match="distinct"):
        zscore_fusion([np.array([1.0, 1.0])], [np.array([1.0])])


def test_fisher_weights_favour_the_score_that_separates_and_drop_one_that_inverts():
    from fedprint.models.metrics import fisher_weights

    rng = np.random.default_rng(0)
    lab = np.r_[np.ones(200), np.zeros(2000)].astype(int)
    strong = np.where(lab == 1, 3.0, 0.0) + rng.normal(size=len(lab))
    weak = np.where(lab == 1, 0.5, 0.0) + rng.normal(size=len(lab))
    w = fisher_weights(np.column_stack([weak, strong]), lab)
    assert sum(w) == pytest.approx(2.0) and w[1] > 4 * w[0] > 0  # LDA: about 3 : 0.5 for independent scores
    inverted = np.where(lab == 1, -1.0, 0.0) + rng.normal(size=len(lab))
    assert fisher_weights(np.column_stack([inverted, strong]), lab)[0] == 0.0
    with pytest.raises(ValueError, match="need at least 2 genuine"):
        fisher_weights(np.zeros((3, 2)), np.array([1, 0, 0]))
