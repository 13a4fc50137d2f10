"""The empirical ε auditor accepts a correct Laplace mechanism and catches one with half the noise."""

import numpy as np

from fedprint.privacy.publish.empirical import clopper_pearson, epsilon_lower_bound


def _laplace_runs(value, scale, n, seed):
    return value + np.random.default_rng(seed).laplace(0.0, scale, n)


def test_correct_scale_passes_and_wrong_scale_is_caught():
    eps, sens, n = 1.0, 1.0, 200_000
    thresholds = np.linspace(-1, 2, 7)
    good = epsilon_lower_bound(_laplace_runs(0, sens / eps, n, 1), _laplace_runs(1, sens / eps, n, 2), thresholds)
    bad = epsilon_lower_bound(_laplace_runs(0, sens / (2 * eps), n, 3), _laplace_runs(1, sens / (2 * eps), n, 4),
                              thresholds)
    assert good <= eps
    assert bad > eps  # half the noise scale is 2-DP, and the audit sees it


def test_clopper_pearson_brackets():
    lo, hi = clopper_pearson(50, 100, 0.05)
    assert lo < 0.5 < hi and clopper_pearson(0, 10, 0.05)[0] == 0.0 and clopper_pearson(10, 10, 0.05)[1] == 1.0
