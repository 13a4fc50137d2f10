"""The one-run lower bound on ε of Steinke, Nasr & Jagielski 2023 (Thm 3 / App. D): m canaries, r guesses, v of
them right. The formulas are in :mod:`fedprint.attacks.one_run_audit`'s docstring; the canary audits there and
the power of :mod:`fedprint.attacks.audit_power` both use these functions.

References
----------
T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Probability of >= v correct guesses out of r (m canaries) under an (ε, δ)-DP null (module docstring)."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    below = np.cumsum(stats.binom.pmf(v - np.arange(1, v + 1), r, q))  # P[v > Bin >= v − i], i = 1..v
    alpha = float(np.max(below / np.arange(1, v + 1)))
    return min(tail + 2.0 * m * delta * alpha, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float = 0.0, confidence: float = 0.95) -> float:
    """Largest ε rejected at ``confidence`` after v of r guesses were right (0 if none is)."""
    beta = 1.0 - confidence
    if p_value(m, r, v, 0.0, delta) >= beta:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value(m, r, v, hi, delta) < beta:
        lo, hi = hi, 2 * hi
        if hi > 100:
            return lo
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if p_value(m, r, v, mid, delta) < beta else (lo, mid)
    return lo


def max_bound(r: int, confidence: float = 0.95, delta: float = 0.0, m: int | None = None) -> float:
    """The bound when all r guesses are right: what r canaries can show at most, whatever the truth."""
    return epsilon_lower_bound(m or r, r, r, delta, confidence)
