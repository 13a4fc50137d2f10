"""Empirical lower bounds on ε from one run with canaries (Steinke, Nasr & Jagielski 2023), and a canary audit of
the client-level DP aggregation (:mod:`fedprint.privacy.client_dp`).

One-run bound. m canaries are each included independently with probability ½; the auditor guesses r of them
(in / out, abstaining on the rest) and gets v right. Under (ε, δ)-DP,

    P[W >= v] <= P[Binomial(r, q_ε) >= v] + 2·m·δ·max_{i>=1} P[v > Binomial(r, q_ε) >= v − i] / i,
    q_ε = e^ε / (1 + e^ε)                                   (Steinke et al. 2023, Thm 3 / App. D),

so every ε whose p-value is below 1 − confidence is rejected; the bound is the largest rejected ε
(:func:`epsilon_lower_bound`). Resolution: even with every guess right the bound cannot exceed
:func:`max_bound` (95 %: r = 100 → 3.5, r = 1000 → 5.8) — report it beside every bound.

Canary audit of the aggregator (:func:`audit_client_dp_release`). The relation of the client-level guarantee is
replace-one, so a canary is a client whose update is +C·u or −C·u (a fair coin; u a random unit direction): the
two neighbours differ by 2C·u, the full sensitivity the noise must cover (a canary that is C·u or 0 would only
test half of it, and a mechanism calibrated for add/remove — half the noise — would pass). Each trial runs the
real :class:`fedprint.server.dp_affr.DPAFFR` aggregation once with a round's own cohort weights, the canary in the
heaviest client's place and the other members' updates zero (known to the auditor); the score is
<release − θ_g, u>. With the run's σ = z·2C·max α the trials are a Gaussian mechanism with multiplier z, whose
ε_lb must stay at or below the claimed ε of one release; with half the noise it must not (tests/privacy/
test_canary_audit_catches_half_noise.py: z = 3, 20,000 trials, 500 guesses). Resolution: ε_lb can never exceed
:func:`max_bound` (500 guesses at 95 %: about 5), and one-run bounds are loose for the Gaussian mechanism — a
sound run with a large claimed ε (small z) passes without proving much.

Power and rounds (issue 59 §5). Every audit also reports its power (:mod:`fedprint.attacks.audit_power`): the
smallest noise shortfall 1 − f (the aggregator's noise at f times the claimed σ) it catches with probability
>= 0.9 at the run's z, from simulating the audit statistic. One release per canary loses power as z grows (the
claimed ε shrinks toward what the binomial noise of r guesses can resolve: a half-noise aggregator was caught 5/6
at z = 5 and 3/6 at z = 9). With ``rounds`` = k the canary takes part in k releases with the same update and
the scores are summed; the audit is then compared with the ε of k releases composed, which audits like one
release at z/√k — :func:`fedprint.attacks.audit_power.choose_rounds` picks k so that z/√k ≈ 2, where half the
noise is caught with probability >= 0.96.

:func:`audit_weighted_sum` keeps the earlier in/out form (C·u or nothing) for :func:`privacy.client_dp.
dp_weighted_sum` with synthetic weights: it catches a σ calibrated for uniform weights while α_c > 1/m.

References
----------
T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fedprint.attacks.one_run_bound import epsilon_lower_bound, max_bound, p_value

__all__ = ["audit_client_dp_release", "audit_releases", "audit_weighted_sum", "epsilon_lower_bound", "max_bound",
           "p_value"]


def audit_weighted_sum(release: Callable[[np.ndarray, np.random.Generator], np.ndarray], *, canaries: int,
                       dim: int, clip: float, guesses: int, rng: np.random.Generator, delta: float = 0.0,
                       confidence: float = 0.95) -> dict:
    """One-run canary audit of an aggregator (module docstring).

    Parameters
    ----------
    release : callable (canary_updates (canaries, dim), rng) -> released vector (dim,)
        Runs the mechanism once on the canaries' clipped updates (rows of zeros for excluded canaries) and
        returns what it publishes (e.g. the noisy weighted sum).
    canaries, dim : int
        Number of canary clients m and model dimension d.
    clip : float
        The aggregator's clipping norm C (canary updates have exactly this norm).
    guesses : int
        r (even): the r/2 highest scores are guessed in, the r/2 lowest out.
    rng : numpy.random.Generator
        Draws the canary directions, the inclusion bits and (passed on) the mechanism's noise.

    Returns
    -------
    dict
        ``epsilon_lb``, ``max_bound`` (the resolution cap), ``correct``, ``guesses``, ``canaries``.
    """
    if guesses % 2 or not 0 < guesses <= canaries:
        raise ValueError(f"guesses: expected an even number in (0, {canaries}], got {guesses}")
    u = rng.normal(size=(canaries, dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    included = rng.random(canaries) < 0.5
    out = release(clip * u * included[:, None], rng)
    scores = u @ out
    order = np.argsort(scores)
    k = guesses // 2
    correct = int((~included[order[:k]]).sum() + included[order[-k:]].sum())
    return {"epsilon_lb": epsilon_lower_bound(canaries, guesses, correct, delta, confidence),
            "max_bound": max_bound(guesses, confidence, delta, canaries), "correct": correct,
            "guesses": guesses, "canaries": canaries, "confidence": confidence}


def audit_client_dp_release(*, noise_multiplier: float, clip: float, weights: Mapping[str, float],
                            claimed_epsilon: float, rng: np.random.Generator, trials: int = 20_000,
                            guesses: int = 500, delta: float = 0.0, confidence: float = 0.95, dim: int = 8,
                            aggregator: Any = None, rounds: int = 1) -> dict:
    """Replace-one canary audit of the real client-DP aggregator (:class:`fedprint.server.dp_affr.DPAFFR`) with a
    round's
    own cohort weights (module docstring, *canary audit of the aggregator*).

    Parameters
    ----------
    noise_multiplier, clip : float
        The run's z and C.
    weights : mapping client -> float
        One round's cohort weights α (e.g. a release of ``dp_releases.json``); the canary is the heaviest client.
    claimed_epsilon : float
        The ε the run claims for ``rounds`` such releases composed (at ``delta``); one release for ``rounds`` = 1.
    rng : numpy.random.Generator
        Canary directions and signs, and (passed to the default aggregator) the mechanism's noise.
    trials, guesses : int
        Releases audited (canaries m) and guesses r (even; the r/2 highest scores are guessed +, the r/2 lowest −).
    dim : int
        Size of the audited model (one float array; the noise is i.i.d. per coordinate, so a small model is the
        same mechanism).
    aggregator : DPAFFR, optional
        The aggregator to audit (default: a :class:`fedprint.server.dp_affr.DPAFFR` with the run's z and C).
    rounds : int
        Releases per canary k (the same update each time, scores summed); default 1. See
        :func:`fedprint.attacks.audit_power.choose_rounds`.

    Returns
    -------
    dict
        :func:`audit_releases`'s dict plus ``claimed_epsilon``, ``canary_weight``, ``ok`` (ε_lb ≤ claimed),
        ``rounds`` and ``power`` (:func:`fedprint.attacks.audit_power.audit_power` at the run's z:
        ``detectable_shortfall``, the smallest noise shortfall caught with probability >= 0.9, None if none).
    """
    from flwr.app import Array, ArrayRecord

    from fedprint.server.dp_affr import DPAFFR

    if aggregator is None:
        aggregator = DPAFFR(num_rounds=1, step=0.0, noise_multiplier=noise_multiplier, gap_noise_multiplier=None,
                            clip=clip, rng=rng)
    labels = sorted(weights)
    canary = max(labels, key=lambda k: weights[k])
    zero = np.zeros(dim)
    aggregator._reference = ArrayRecord({"w": Array(zero.astype(np.float32))})
    alpha = [float(weights[k]) for k in labels]

    def release(update: np.ndarray) -> np.ndarray:
        out = aggregator._aggregate_arrays([{"w": update if k == canary else zero} for k in labels], alpha)
        return out["w"].numpy().astype(np.float64)

    from fedprint.attacks.audit_power import audit_power

    res = audit_releases(release, trials=trials, dim=dim, clip=clip, guesses=guesses, rng=rng, delta=delta,
                         confidence=confidence, rounds=rounds)
    power = audit_power(noise_multiplier, trials=trials, guesses=guesses, claimed_epsilon=claimed_epsilon,
                        rounds=rounds, delta=delta, confidence=confidence)
    return {**res, "claimed_epsilon": float(claimed_epsilon), "canary_weight": float(weights[canary]),
            "ok": bool(res["epsilon_lb"] <= claimed_epsilon), "power": power}


def audit_releases(release: Callable[[np.ndarray], np.ndarray], *, trials: int, dim: int, clip: float, guesses: int,
                   rng: np.random.Generator, delta: float = 0.0, confidence: float = 0.95, rounds: int = 1) -> dict:
    """Replace-one canaries: trial k releases ``release(s_k·C·u_k)`` ``rounds`` times (s_k = ±1 with probability ½,
    u_k a random unit vector); the score, <release, u_k> summed over those releases, ranks the trials, the top r/2
    are guessed +, the bottom r/2 −. Each trial is one canary of :func:`epsilon_lower_bound` (independent releases
    are one run of their product mechanism; with ``rounds`` > 1 the ε to compare is that of ``rounds`` releases)."""
    if guesses % 2 or not 0 < guesses <= trials:
        raise ValueError(f"guesses: expected an even number in (0, {trials}], got {guesses}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds: expected an integer >= 1, got {rounds!r}")
    u = rng.normal(size=(trials, dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    plus = rng.random(trials) < 0.5
    scores = np.array([sum(float(release(np.where(plus[k], clip, -clip) * u[k]) @ u[k]) for _ in range(rounds))
                       for k in range(trials)])
    order = np.argsort(scores)
    k = guesses // 2
    correct = int((~plus[order[:k]]).sum() + plus[order[-k:]].sum())
    return {"epsilon_lb": epsilon_lower_bound(trials, guesses, correct, delta, confidence),
            "max_bound": max_bound(guesses, confidence, delta, trials), "correct": correct,
            "guesses": guesses, "canaries": trials, "confidence": confidence, "rounds": rounds}
