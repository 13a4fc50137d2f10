"""Membership inference (attacks.membership): metric definitions, statistics, LiRA, and the attack
separating a memorising model from an untrained one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprint.attacks import membership as mia
from fedprint.config import TrainConfig
from fedprint.data.pairs import make_pairs
from fedprint.data.stripes import stripe_records
from fedprint.models.preprocess import InputSpec, to_tensor_batch
from fedprint.models.siamese import CompactEncoder
from fedprint.training.trainer import train_siamese


def test_auc_and_balanced_accuracy_hand_computed():
    # members 4, 2 ; non-members 3, 1: member > non-member in 3 of 4 comparisons
    m = mia.mia_metrics([4.0, 3.0, 2.0, 1.0], [1, 0, 1, 0])
    assert m["auc"] == pytest.approx(0.75)
    # oracle: threshold 4 -> TPR 1/2, TNR 1 -> 0.75; threshold 2 -> TPR 1, TNR 1/2 -> 0.75
    assert m["balanced_accuracy_oracle"] == pytest.approx(0.75)
    # well separated: any threshold fitted on one half lies in the gap (4, 10), so it separates the other half
    perfect = mia.mia_metrics([10, 11, 12, 13, 1, 2, 3, 4], [1, 1, 1, 1, 0, 0, 0, 0])
    assert perfect["auc"] == 1.0
    assert perfect["balanced_accuracy"] == 1.0
    assert perfect["mi_decision_bits"] == pytest.approx(1.0)  # Ŝ = M, H(M) = 1 bit
    assert perfect["entropy_decision_bits"] == pytest.approx(1.0)
    assert perfect["entropy_membership_bits"] == pytest.approx(1.0)


def test_mutual_information_definitions():
    assert mia.mutual_information_bits([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(0.0)
    assert mia.mutual_information_bits([0, 0, 1, 1], [1, 1, 0, 0]) == pytest.approx(1.0)
    # p(m, s): (0,0) 1/2, (1,0) 1/4, (1,1) 1/4 -> I = H(M) + H(S) - H(M,S) = 1 + 0.8113 - 1.5
    assert mia.mutual_information_bits([0, 0, 1, 1], [0, 0, 0, 1]) == pytest.approx(0.311278, abs=1e-6)


def test_tpr_at_fpr_resolvable_only_with_enough_nonmembers():
    rng = np.random.default_rng(0)
    few = mia.mia_metrics(rng.normal(size=80), np.r_[np.ones(30), np.zeros(50)])
    assert few["tpr_at_1pct_fpr"] == "not resolvable (50 non-members)"
    assert few["tpr_at_0.1pct_fpr"] == "not resolvable (50 non-members)"
    scores = np.r_[np.linspace(10, 11, 20), np.linspace(0, 1, 200)]  # every member above every non-member
    enough = mia.mia_metrics(scores, np.r_[np.ones(20), np.zeros(200)])
    assert enough["tpr_at_1pct_fpr"] == 1.0
    assert enough["tpr_at_0.1pct_fpr"] == "not resolvable (200 non-members)"


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="members"):
        mia.mia_metrics([1.0, 2.0, 3.0], [1, 0, 0])
    with pytest.raises(ValueError, match="finite"):
        mia.mia_metrics([1.0, np.nan, 3.0, 4.0], [1, 1, 0, 0])


def test_embedding_statistics_hand_case():
    e = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    st = mia.embedding_statistics(e, [np.array([0, 1]), np.array([2, 3])])
    assert st["mean_genuine_distance"] == pytest.approx([np.sqrt(2), np.sqrt(2)])
    # centroids (.5,.5), (-.5,-.5): spread sqrt(.5), centroid distance sqrt(2) -> ratio 0.5
    assert st["compactness_ratio"] == pytest.approx([0.5, 0.5])
    # genuine d^2 = 2; impostor pairs: d = 2 (antipodal) x1 and sqrt(2) x2 per image -> hinge 0
    assert st["contrastive_loss"] == pytest.approx([2 * 1 / 5, 2 * 1 / 5])


def test_balanced_inclusion_and_lira_separate_gaussian_members():
    rng = np.random.default_rng(1)
    inc = mia.balanced_inclusion(50, 6, rng)
    assert inc.shape == (6, 50) and np.all(inc.sum(0) == 3)
    with pytest.raises(ValueError, match="even"):
        mia.balanced_inclusion(5, 3, rng)
    base = rng.normal(0, 1, 50)  # per-identity difficulty
    shadow = base + 0.8 * inc + rng.normal(0, 0.2, inc.shape)
    member = np.arange(50) < 25
    target = base + 0.8 * member + rng.normal(0, 0.2, 50)
    scores = mia.lira_scores(target, shadow, inc)
    assert mia.mia_metrics(scores["lira_online"], member)["auc"] > 0.9
    assert mia.mia_metrics(scores["lira_offline"], member)["auc"] > 0.9
    # the raw statistic without per-identity calibration is much weaker (difficulty dominates)
    assert mia.mia_metrics(target, member)["auc"] < mia.mia_metrics(scores["lira_online"], member)["auc"]


def _toy(n_fingers: int, seed: int):
    recs = stripe_records(n_fingers=n_fingers, n_impressions=4, size=32, seed=seed)
    imgs = to_tensor_batch([r.image for r in recs], InputSpec(size=32))
    groups = mia.identity_groups([r.identity for r in recs])
    member = np.arange(len(groups)) % 2 == 0
    return recs, imgs, list(groups.values()), member


def test_memorising_model_is_detected_and_untrained_model_is_not():
    torch.set_num_threads(1)
    recs, imgs, groups, member = _toy(40, seed=1)
    train_idx = np.concatenate([g for g, m in zip(groups, member, strict=True) if m])
    torch.manual_seed(0)
    net = CompactEncoder(embedding_dim=16, width=8)
    memorise = TrainConfig(epochs=30, lr=3e-3, seed=0, sampler="pairs", augment=False, schedule="constant")
    train_siamese(net, imgs, make_pairs(recs, train_idx, seed=0), memorise, progress=False)
    scores = mia.attack_scores(mia.model_statistics(net, imgs, groups))
    assert mia.mia_metrics(scores["yeom_distance"], member)["auc"] > 0.85
    assert mia.mia_metrics(scores["compactness"], member)["auc"] > 0.85
    # untrained model: membership is an arbitrary label, so the attack is at chance (200 fingers: sd ~ 0.04)
    _, imgs2, groups2, member2 = _toy(200, seed=2)
    torch.manual_seed(1)
    rand = CompactEncoder(embedding_dim=16, width=8)
    scores2 = mia.attack_scores(mia.model_statistics(rand, imgs2, groups2))
    for s in scores2.values():
        assert abs(mia.mia_metrics(s, member2)["auc"] - 0.5) < 0.15


def test_plot_mia_roc(tmp_path):
    rng = np.random.default_rng(0)
    path = mia.plot_mia_roc(tmp_path / "roc.png", {"a": (rng.normal(size=40), np.arange(40) < 20)})
    assert path.is_file() and path.stat().st_size > 1000


def test_auc_bootstrap_interval_contains_auc_and_shrinks_with_n():
    rng = np.random.default_rng(3)
    small = np.r_[rng.normal(1, 1, 20), rng.normal(0, 1, 20)]
    big = np.r_[rng.normal(1, 1, 400), rng.normal(0, 1, 400)]
    m_small = mia.mia_metrics(small, np.arange(40) < 20)
    m_big = mia.mia_metrics(big, np.arange(800) < 400)
    for m in (m_small, m_big):
        lo, hi = m["auc_ci95"]
        assert lo <= m["auc"] <= hi
    assert np.diff(m_big["auc_ci95"])[0] < np.diff(m_small["auc_ci95"])[0] / 2


def test_lira_with_two_shadows_uses_the_additive_model():
    rng = np.random.default_rng(4)
    inc = mia.balanced_inclusion(60, 2, rng)
    base = rng.normal(0, 1, 60)
    shadow = base + 0.8 * inc + rng.normal(0, 0.2, inc.shape)
    member = np.arange(60) < 30
    target = base + 0.8 * member + rng.normal(0, 0.2, 60)
    scores = mia.lira_scores(target, shadow, inc)
    assert np.all(np.isfinite(scores["lira_online"])) and np.all(np.isfinite(scores["lira_offline"]))
    assert len(np.unique(scores["lira_offline"])) > 50  # no saturation from a degenerate variance
    assert mia.mia_metrics(scores["lira_online"], member)["auc"] > 0.85


def test_binned_mi_does_not_split_ties_by_order():
    # all scores tied: whatever the order, the binned score carries no information about membership
    m = mia.mia_metrics(np.zeros(40), np.arange(40) < 20)
    assert m["mi_binned_bits"] == 0.0 and m["auc"] == 0.5
