"""Power of the replace-one canary audit (:func:`fedprint.attacks.one_run_audit.audit_client_dp_release`): the
smallest noise shortfall it detects at a run's noise multiplier z, and how many rounds a canary should take part in.

The audit statistic. The canary sits in the heaviest client's place (weight α = max α), with update s·C·u
(s = ±1, u a unit vector); the release is θ_g + α·s·C·u + N(0, σ²I) with σ = f·z·2C·max α, where f = 1 for a
sound aggregator and f < 1 for one whose noise falls short by 1 − f. The score <release − θ_g, u>, summed over the
k releases (rounds) the canary takes part in and divided by k·α·C, is s + N(0, (2·z·f/√k)²): the audit of k
releases at z is the audit of one release at z/√k, and the ε it is compared with is that of k releases composed
(Gaussian RDP composes exactly, so that is one release at z/√k too). Nothing else of the run matters.

Power. The audit flags a violation iff v correct guesses out of r give ε_lb > claimed ε, i.e. v >= v* (the
smallest such v, from the same :func:`~fedprint.attacks.one_run_audit.epsilon_lower_bound`). Its power at a
noise factor f is P[V >= v*] under the model above, estimated from ``replicates`` simulated audits (seeded, with
the same draws for every f, so the estimate is a smooth function of f). :func:`audit_power` reports the largest f
on a grid of 0.05 steps whose detection probability is >= 0.9 (found by bisection: detection falls as f grows):
"a noise shortfall of 1 − f or more is caught with probability >= 0.9". Measured (20,000 trials, 500 guesses,
δ = 1e-5, one round): shortfall 0.5 (half noise) at z = 1.5-4, 0.55 at z = 5-7, 0.6 at z = 9 (half noise caught
with probability 0.48); below z ≈ 1.5 the claimed ε nears the audit's ceiling
(:func:`~fedprint.attacks.one_run_audit.max_bound`) and the power drops (0.55 at z = 1.2, 0.6 at 1.1), and at
z = 1 no shortfall is detectable at all (``detectable_shortfall`` None).

Strengthening. Because k rounds at z audit like one at z/√k, a large z is audited with
:func:`choose_rounds` = ⌈(z / 2)²⌉ rounds per canary (at most the run's releases and a work budget): z = 9 with
21 rounds is audited like z = 1.96, where half the noise is caught with probability 0.99 (0.965 with the 10
rounds ``fedprint audit`` allows).
"""

from __future__ import annotations

import math

import numpy as np

#: Detection probability the reported power refers to.
DETECT = 0.9

#: Noise factors f examined (shortfall 1 − f from 0.05 to 0.95).
FACTORS = tuple(round(1.0 - 0.05 * i, 2) for i in range(1, 20))

#: z / √k the audit is most sensitive at (measured: half noise caught w.p. >= 0.99 at 20,000 trials, 500 guesses).
BEST_Z = 2.0


def choose_rounds(noise_multiplier: float, *, available: int, max_rounds: int | None = None) -> int:
    """Rounds per canary: ⌈(z / :data:`BEST_Z`)²⌉, at least 1, at most ``available`` (the run's releases) and
    ``max_rounds`` (a work budget: the audit runs the aggregator trials x rounds times)."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise ValueError(f"noise_multiplier: expected a finite number > 0, got {noise_multiplier!r}")
    k = max(1, math.ceil((noise_multiplier / BEST_Z) ** 2 - 1e-9))
    for cap in (available, max_rounds):
        if cap is not None:
            k = min(k, max(1, int(cap)))
    return k


def violation_threshold(trials: int, guesses: int, claimed_epsilon: float, delta: float,
                        confidence: float) -> int | None:
    """v*: the fewest correct guesses (of ``guesses``) for which the audit's ε_lb exceeds ``claimed_epsilon``;
    None when even all-correct guesses cannot (the claimed ε is at or above the audit's ceiling)."""
    from fedprint.attacks.one_run_bound import epsilon_lower_bound

    def flags(v: int) -> bool:
        return epsilon_lower_bound(trials, guesses, v, delta, confidence) > claimed_epsilon

    if not flags(guesses):
        return None
    lo, hi = 0, guesses
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if flags(mid) else (mid + 1, hi)
    return lo


def detection_probability(scale: float, *, trials: int, guesses: int, v_star: int, replicates: int,
                          seed: int) -> float:
    """P[V >= v*] when each trial's normalised score is s + N(0, scale²) (module docstring), from ``replicates``
    simulated audits seeded by ``seed`` (the same draws for every ``scale``)."""
    rng = np.random.default_rng(seed)
    k = guesses // 2
    hits, done = 0, 0
    chunk = max(1, 4_000_000 // trials)
    while done < replicates:
        n = min(chunk, replicates - done)
        plus = rng.random((n, trials)) < 0.5
        scores = np.where(plus, 1.0, -1.0) + scale * rng.standard_normal((n, trials))
        order = np.argpartition(scores, (k - 1, trials - k), axis=1)
        low, high = order[:, :k], order[:, trials - k:]
        correct = (~np.take_along_axis(plus, low, 1)).sum(1) + np.take_along_axis(plus, high, 1).sum(1)
        hits += int((correct >= v_star).sum())
        done += n
    return hits / replicates


def audit_power(noise_multiplier: float, *, trials: int, guesses: int, claimed_epsilon: float, rounds: int = 1,
                delta: float = 0.0, confidence: float = 0.95, detect: float = DETECT, replicates: int = 200,
                seed: int = 0) -> dict:
    """The smallest noise shortfall the audit detects with probability >= ``detect`` (module docstring).

    Parameters
    ----------
    noise_multiplier : float
        The run's z.
    trials, guesses, rounds : int
        The audit's canaries m, guesses r and releases per canary k.
    claimed_epsilon : float
        The ε the audit compares ε_lb with (that of ``rounds`` releases).
    delta, confidence : float
        As in the audit.
    detect, replicates, seed
        Detection probability asked for, simulated audits per noise factor, their seed (the power is a
        deterministic computation, not privacy noise).

    Returns
    -------
    dict
        ``detectable_shortfall`` (1 − f, or None when no f on the grid is detected), ``noise_factor`` (f),
        ``detection_probability`` (at f), ``half_noise_detection`` (at f = 0.5), ``violation_threshold`` (v*),
        ``rounds``, ``detect``, ``replicates``.
    """
    v_star = violation_threshold(trials, guesses, claimed_epsilon, delta, confidence)
    out = {"rounds": int(rounds), "detect": detect, "replicates": replicates, "violation_threshold": v_star,
           "detectable_shortfall": None, "noise_factor": None, "detection_probability": None,
           "half_noise_detection": 0.0}
    if v_star is None:
        return out

    def prob(f: float) -> float:
        return detection_probability(2.0 * noise_multiplier * f / math.sqrt(rounds), trials=trials, guesses=guesses,
                                     v_star=v_star, replicates=replicates, seed=seed)

    out["half_noise_detection"] = prob(0.5)
    grid = sorted(FACTORS)  # ascending f: large shortfalls first
    if prob(grid[0]) < detect:
        return out
    lo, hi = 0, len(grid) - 1  # invariant: grid[lo] detected; find the last detected index (detection falls with f)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if prob(grid[mid]) >= detect else (lo, mid - 1)
    f = grid[lo]
    out.update(detectable_shortfall=round(1.0 - f, 2), noise_factor=f, detection_probability=prob(f))
    return out
