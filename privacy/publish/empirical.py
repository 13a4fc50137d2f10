"""Empirical privacy auditing: a statistically valid lower bound on ε from samples of two neighbouring runs.

For an ε-DP mechanism M and neighbouring inputs a, b, every output event E satisfies
P[M(a) ∈ E] ≤ e^ε · P[M(b) ∈ E] + δ. Running M many times on a and on b and counting how often each event
happens gives Clopper–Pearson bounds p_a ≥ p̂_a^lo and p_b ≤ p̂_b^hi (each at confidence 1 − α/2), so

    ε ≥ ε_lb = max_E log((p̂_a^lo − δ) / p̂_b^hi)

holds with probability ≥ 1 − α per event (Bonferroni over the events checked). A correct mechanism yields
ε_lb ≤ ε (up to that failure probability); a mechanism with too little noise yields ε_lb > ε once the sample is
large enough. Tests use both directions: the sound variant passes, the same mechanism with a deliberately
wrong (e.g. halved) noise scale fails — so the test has the power to catch a wrong scale.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 − alpha) Clopper–Pearson interval for a binomial proportion k / n."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"clopper_pearson: need 0 <= k <= n and n > 0, got k={k}, n={n}")
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(
    scores_a: np.ndarray,
    scores_b: np.ndarray,
    thresholds: Sequence[float],
    *,
    delta: float = 0.0,
    alpha: float = 0.01,
) -> float:
    """Lower confidence bound on ε from 1-D output statistics of runs on neighbouring inputs a and b.

    Parameters
    ----------
    scores_a, scores_b : ndarray, shape (n,)
        A scalar statistic of each output (e.g. the released value of the pixel that differs).
    thresholds : sequence of float
        Events checked: {score > t} and {score <= t} for each t, in both directions (a vs b and b vs a).
    delta : float
        The δ of the claimed guarantee.
    alpha : float
        Overall failure probability, split (Bonferroni) over all events checked.

    Returns
    -------
    float
        ε_lb (0 when no event shows any evidence); compare with the claimed ε.
    """
    a, b = np.asarray(scores_a, float), np.asarray(scores_b, float)
    if a.ndim != 1 or b.ndim != 1 or not len(a) or not len(b):
        raise ValueError("epsilon_lower_bound: scores_a and scores_b must be non-empty 1-D arrays")
    n_events = 4 * len(thresholds)
    a_each = alpha / max(n_events, 1)
    best = 0.0
    for t in thresholds:
        for ev_a, ev_b in (((a > t).sum(), (b > t).sum()), ((a <= t).sum(), (b <= t).sum())):
            for (k1, n1), (k2, n2) in (((ev_a, len(a)), (ev_b, len(b))), ((ev_b, len(b)), (ev_a, len(a)))):
                lo1, _ = clopper_pearson(int(k1), n1, a_each)
                _, hi2 = clopper_pearson(int(k2), n2, a_each)
                if lo1 - delta > 0 and hi2 > 0:
                    best = max(best, float(np.log((lo1 - delta) / hi2)))
    return best
