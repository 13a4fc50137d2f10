"""The δ of an (ε, δ) guarantee: a default far below 1/n, and the sentence that prints it with n.

(ε, δ)-DP allows a failure probability δ per unit; a mechanism that releases one of n units' data in the clear
with probability δ each is (0, δ)-DP, so δ must be small against 1/n for the guarantee to mean anything. The
default here keeps n·δ ≤ 0.1 (Dwork & Roth 2014, Sec. 2.3: "δ less than the inverse of any polynomial in n").
"""

from __future__ import annotations


def default_delta(n: int) -> float:
    """The largest power of ten ≤ 1/(10·n) for ``n`` units (e.g. 1,000 → 1e-4, 3,000 → 1e-5): n·δ ≤ 0.1."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"default_delta: n must be an integer >= 1, got {n!r}")
    return 10.0 ** -len(str(10 * n - 1))


def delta_rule(delta: float, n: int, unit: str) -> str:
    """``"δ = 1e-05 for n = 3 clients (n·δ = 3e-05 ≤ 0.1)"``, saying so when δ exceeds 1/(10·n)."""
    ok = n * delta <= 0.1 + 1e-12
    return (f"δ = {delta:.0e} for n = {n} {unit} (n·δ = {n * delta:.2g}"
            + (" ≤ 0.1)" if ok else " > 0.1: above the default rule δ ≤ 1/(10·n), a weak guarantee)"))
