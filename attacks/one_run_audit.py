"""Empirical lower bounds on ε from one run with canaries (Steinke, Nasr & Jagielski 2023), and a canary audit of
the client-level DP aggregation (:mod:`privacy.client_dp`).

One-run bound. m canaries are each included independently with probability ½; the auditor guesses r of them
(in / out, abstaining on the rest) and gets v right. Under (ε, δ)-DP,

    P[W >= v] <= P[Binomial(r, q_ε) >= v] + 2·m·δ·max_{i>=1} P[v > Binomial(r, q_ε) >= v − i] / i,
    q_ε = e^ε / (1 + e^ε)                                   (Steinke et al. 2023, Thm 3 / App. D),

so every ε whose p-value is below 1 − confidence is rejected; the bound is the largest rejected ε
(:func:`epsilon_lower_bound`). Resolution: even with every guess right the bound cannot exceed
:func:`max_bound` (95 %: r = 100 → 3.5, r = 1000 → 5.8) — report it beside every bound.

Canary audit of the weighted sum (:func:`audit_weighted_sum`). Canary "clients" j = 1..m, each with a random unit
direction u_j in the model's d dimensions and the weight α_c its aggregation gives it, contribute the update
C·u_j when included and nothing otherwise (replace-one neighbours: the canary's data replaced by data that
yields a zero update). One release of the aggregator is observed; the score of canary j is <release, u_j>; the
top k scores are guessed "in", the bottom k "out". A correctly calibrated aggregator must give a bound at or below
its claimed ε; one that calibrates its noise for uniform weights while α_c > 1/m must not.

References
----------
T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023.
"""

from __future__ import annotations

import math
from collections.abc import Callable

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


def audit_client_dp_release(*, noise_multiplier: float, clip: float, max_alpha: float, claimed_epsilon: float,
                            rng: np.random.Generator, canaries: int = 1000, dim: int = 20_000, guesses: int = 400,
                            delta: float = 0.0, confidence: float = 0.95) -> dict:
    """Canary audit of one model release of :class:`server.dp_affr.DPAFFR` with a run's own parameters.

    Every canary gets the run's largest weight ``max_alpha`` (the client the noise must cover), the noise is the
    run's σ = z·2C·max α (:func:`privacy.client_dp.dp_weighted_sum`), and the release is audited on a ``dim``-
    dimensional slice of the model (the Gaussian noise is independent per coordinate, so a slice is the same
    mechanism; it keeps the canaries nearly orthogonal without materialising the full model). Returns
    :func:`audit_weighted_sum`'s dict plus ``claimed_epsilon`` (one release).
    """
    from privacy.client_dp import dp_weighted_sum

    def release(canary_updates: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        updates = {f"c{j}": [canary_updates[j]] for j in range(canaries)}
        out, _ = dp_weighted_sum(updates, dict.fromkeys(updates, float(max_alpha)), clip, noise_multiplier, gen)
        return out[0]

    res = audit_weighted_sum(release, canaries=canaries, dim=dim, clip=clip, guesses=guesses, rng=rng,
                             delta=delta, confidence=confidence)
    return {**res, "claimed_epsilon": float(claimed_epsilon)}
