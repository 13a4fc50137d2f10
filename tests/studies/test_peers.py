"""studies.peers: every pair of a set, bootstrap-by-finger intervals, the weighted rates' arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.models.metrics import eer, fnmr_at_fmr
from studies.peers import _weighted_rates, all_pairs, rates


def test_all_pairs_labels_and_caps_only_impostors():
    ids = np.repeat(np.arange(5), 3)
    pairs, lab = all_pairs(ids, None)
    assert len(pairs) == 15 * 14 // 2 and lab.sum() == 5 * 3
    capped, lab2 = all_pairs(ids, 10)
    assert lab2.sum() == 15 and (lab2 == 0).sum() == 10 and np.all(np.diff(capped[:, 0] * 100 + capped[:, 1]) > 0)


def test_unit_weights_give_the_plain_rates_and_the_interval_holds_the_estimate():
    rng = np.random.default_rng(1)
    ids = np.repeat(np.arange(30), 4)
    pairs, lab = all_pairs(ids, None)
    s = np.where(lab == 1, 1.5, 0.0) + rng.normal(size=len(lab))
    e, f = _weighted_rates(s, lab, np.ones(len(lab)))
    assert e == pytest.approx(eer(s, lab, True), abs=2e-3)
    assert f == pytest.approx(fnmr_at_fmr(s, lab, 0.01, True), abs=1e-9)
    r = rates(s, pairs, lab, ids)
    assert r["eer_ci"][0] <= r["eer"] <= r["eer_ci"][1] and r["n_genuine"] == 30 * 6
