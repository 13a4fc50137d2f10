"""Group privacy: the guarantee of an (ε, δ)-DP mechanism for a group of g records (e.g. a finger).

References
----------
C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Thm 2.2 (pure ε); the (ε, δ) form
follows by applying the definition g times along a path of neighbours.
"""

from __future__ import annotations

import math


def group_privacy(epsilon: float, delta: float, g: int) -> tuple[float, float]:
    """(ε, δ) for a group of ``g`` records of an (ε, δ)-DP mechanism: (g·ε, g·e^{(g−1)ε}·δ), δ capped at 1.

    Parameters
    ----------
    epsilon, delta : float
        The mechanism's guarantee for one record (ε >= 0, 0 <= δ <= 1).
    g : int
        Group size, >= 1.
    """
    if g < 1:
        raise ValueError(f"g: expected a group size >= 1, got {g}")
    log_d = math.log(g) + (g - 1) * epsilon + math.log(delta) if delta > 0 else -math.inf
    return g * epsilon, float(min(1.0, math.exp(min(log_d, 0.0))))
