"""Client-level differential privacy for weighted federated averaging — sound for AFFR's adaptive weights.

Unit and relation. The unit is a whole institution (client): two federations are neighbours when one client's
entire data is replaced by anything else (replace-one). The released objects are the global models
θ_g^1 … θ_g^T (and everything computed from them).

Cohort (public, fixed before any reply). Each round the server chooses its cohort — the nodes it sends the round
to — from the connected nodes only (Flower's sampler; no client data is read), and fixes ``m = |cohort|`` and the cap
c/m then. A member's reply can be rejected (an error, a time-out, NaN/Inf arrays, ``num-examples <= 0``, a
missing gap — all of which can depend on its data): it then still counts, with a gap of 0 and a zero update, at
the weight the rule gives it. So the number of clients m, who takes part, the cap and the shape of σ never depend
on any client's data (:class:`fedprint.server.dp_affr.DPAFFR`). Replacing client j's data by, e.g., an empty set changes
only client j's own gap coordinate and client j's own clipped update — exactly what steps 1 and 3 bound.

Mechanism, per round t (:class:`fedprint.server.dp_affr.DPAFFR`):

1. Every cohort member contributes its generalization gap G_i (AFFR, Yan et al. 2025 Eq. 5), clipped to [−1, 1]
   (0 for a rejected member). The server adds N(0, (2·z_g)²) to each gap (:func:`noisy_gaps`): the vector of
   gaps has L2 sensitivity 2 under replace-one (only the replaced client's own coordinate moves, by at most 2).
   A Gaussian mechanism.
2. The AFFR weight update (FedDG-GA rule) runs on the *noisy* gaps and the previous (public) weights of the
   cohort: post-processing. The weights are then projected onto the capped simplex {α : Σα = 1, 0 ≤ α_i ≤ c/m}
   (:func:`cap_weights`), so no client can reach α → 1.
3. Each member's update Δ_i = θ_i − θ_g is clipped to L2 norm C (:func:`clip_update`; a rejected member's is 0).
   The server releases θ_g + Σ_i α_i Δ̃_i + N(0, σ² I) with σ = z · 2C · max_i α_i. With α public at this point
   (step 2 is a post-processing of released values), replacing client j's data changes the weighted sum by
   α_j ‖Δ̃_j − Δ̃'_j‖ ≤ 2C α_j ≤ 2C max_i α_i: L2 sensitivity 2C·max α. A Gaussian mechanism with noise
   multiplier z.

Proof of the guarantee. Round t is the adaptive composition of two Gaussian mechanisms with noise multipliers
z_g,t and z_t (each noise std = multiplier × L2 sensitivity). The Gaussian mechanism with multiplier z satisfies
(λ, λ/(2z²))-RDP for every order λ > 1 (Mironov 2017, Prop. 7); RDP composes additively over mechanisms and over
adaptively chosen rounds (Mironov 2017, Prop. 1), so the releases r = 1 … R made so far satisfy
(λ, Σ_r λ/2·(1/z_r² + 1/z_g,r²))-RDP — each release with the parameters it actually used
(:func:`composed_epsilon`); that is converted to (ε, δ) with Opacus's RDP conversion. Every release counts,
including a round re-run after a crash (its first model may already have reached the clients): the server logs a
release before the model leaves it (:mod:`fedprint.server.checkpoint`). **No amplification by sampling is claimed**: a
client that is not in a round's cohort is charged as if it had been (sampling can only lower the true ε).
A mechanism that calibrated σ to 2C/m (the uniform 1/m average) while α_i > 1/m would under-noise client i by the
factor α_i·m — exactly what Flower's ``DifferentialPrivacyServerSideFixedClipping`` does (σ = z·C/m) when it wraps
a weighted strategy.

What is NOT protected: the server sees each client's clipped update and raw gap (central DP, trusted server);
per-client metrics the ClientApp reports (validation accuracies, gap standard errors, training loss, counts, test
metrics, validation thresholds) are a server-internal record, written to the server's round logs and report
unprotected — they are not part of the release; the number of clients, their names and the rounds they were
asked to take part in are public. A finger (or a record) is protected at least as well as its institution: one
finger changes at most its institution's data, so the client-level (ε, δ) holds for it too.

References
----------
I. Mironov, "Rényi Differential Privacy", CSF 2017. H. B. McMahan et al., "Learning Differentially Private
Recurrent Language Models", ICLR 2018 (client-level DP-FedAvg, weighted sums). Yan et al. 2025 (AFFR).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

#: RDP orders used for the conversion to (ε, δ) (Opacus's default grid).
ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def clip_update(update: Sequence[np.ndarray], clip: float) -> tuple[list[np.ndarray], float]:
    """Scale a model update (list of arrays) to L2 norm at most ``clip``; returns (clipped, original norm)."""
    norm = math.sqrt(sum(float(np.sum(np.square(u, dtype=np.float64))) for u in update))
    scale = min(1.0, clip / norm) if norm > 0 else 1.0
    return [np.asarray(u, np.float64) * scale for u in update], norm


def cap_weights(alpha: Mapping[str, float], cap: float) -> dict[str, float]:
    """Euclidean-nearest weights on {Σα = 1, 0 ≤ α_i ≤ cap}: water-filling (clip, renormalise the rest, repeat).

    ``cap`` must be >= 1/len(alpha) (else the set is empty).
    """
    keys = sorted(alpha)
    if not keys:
        raise ValueError("alpha: expected at least one client")
    if cap * len(keys) < 1 - 1e-12:
        raise ValueError(f"cap: {cap} x {len(keys)} clients < 1: no weights can satisfy it")
    a = np.array([max(0.0, float(alpha[k])) for k in keys])
    a = a / a.sum() if a.sum() > 0 else np.full(len(keys), 1.0 / len(keys))
    fixed = np.zeros(len(keys), bool)
    for _ in range(len(keys)):
        over = (a > cap + 1e-15) & ~fixed
        if not over.any():
            break
        fixed |= over
        a[fixed] = cap
        free = ~fixed
        rest = 1.0 - cap * fixed.sum()
        a[free] = a[free] / a[free].sum() * rest if a[free].sum() > 0 else rest / max(free.sum(), 1)
    return {k: float(v) for k, v in zip(keys, a, strict=True)}


def noisy_gaps(gaps: Mapping[str, float], gap_noise_multiplier: float, rng: np.random.Generator
               ) -> dict[str, float]:
    """Gaps clipped to [−1, 1] plus N(0, (2·z_g)²) each (L2 sensitivity 2 under replace-one)."""
    return {k: float(np.clip(v, -1.0, 1.0) + rng.normal(0.0, 2.0 * gap_noise_multiplier))
            for k, v in sorted(gaps.items())}


def model_noise_std(clip: float, alpha: Mapping[str, float], noise_multiplier: float) -> float:
    """σ of the model release: z · 2C · max_i α_i (the weighted sum's L2 sensitivity under replace-one)."""
    return float(noise_multiplier * 2.0 * clip * max(alpha.values()))


def dp_weighted_sum(updates: Mapping[str, Sequence[np.ndarray]], alpha: Mapping[str, float], clip: float,
                    noise_multiplier: float, rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    """Σ_i α_i clip(Δ_i, C) + N(0, σ² I), σ = :func:`model_noise_std` (step 3 of the module docstring).

    Returns the noisy weighted update (float64 arrays) and diagnostics (``sigma``, ``norms``, ``clipped``).
    """
    if set(updates) != set(alpha):
        raise ValueError(f"updates and alpha: same clients expected, got {sorted(updates)} and {sorted(alpha)}")
    sigma = model_noise_std(clip, alpha, noise_multiplier)
    total: list[np.ndarray] | None = None
    norms = {}
    for k in sorted(updates):
        clipped, norms[k] = clip_update(updates[k], clip)
        contrib = [alpha[k] * c for c in clipped]
        total = contrib if total is None else [t + c for t, c in zip(total, contrib, strict=True)]
    assert total is not None
    noisy = [t + rng.normal(0.0, sigma, size=t.shape) for t in total]
    return noisy, {"sigma": sigma, "norms": norms, "clipped": sum(n > clip for n in norms.values())}


def composed_epsilon(releases: Sequence[tuple[float, float | None]], delta: float) -> float:
    """(ε at δ) of a sequence of releases, each ``(z, z_g)`` with the multipliers it used (module docstring).

    ``z_g`` None = that release had no gap release. Any ``z <= 0`` (or ``z_g <= 0``) → ∞; no release → 0.
    """
    from opacus.accountants.analysis.rdp import get_privacy_spent

    if not releases:
        return 0.0
    per = 0.0
    for z, zg in releases:
        if z <= 0 or (zg is not None and zg <= 0):
            return math.inf
        per += 1.0 / z ** 2 + (0.0 if zg is None else 1.0 / zg ** 2)
    rdp = np.array([lam * per / 2.0 for lam in ORDERS])
    eps, _ = get_privacy_spent(orders=ORDERS, rdp=rdp, delta=delta)
    return float(eps)


def client_epsilon(noise_multiplier: float, gap_noise_multiplier: float | None, rounds: int, delta: float) -> float:
    """(ε at δ) of ``rounds`` rounds of the module docstring's mechanism, same multipliers (:func:`composed_epsilon`).

    ``gap_noise_multiplier`` None = no gap release (uniform weights, DP-FedAvg). ``noise_multiplier`` 0 → ∞.
    """
    if noise_multiplier <= 0 or (gap_noise_multiplier is not None and gap_noise_multiplier <= 0):
        return math.inf
    return composed_epsilon([(noise_multiplier, gap_noise_multiplier)] * max(rounds, 1), delta)


def calibrate(target_epsilon: float, delta: float, rounds: int, gap_ratio: float | None = 1.0,
              tol: float = 1e-3) -> tuple[float, float | None]:
    """(z, z_g = gap_ratio · z) whose ``rounds`` rounds spend ``target_epsilon`` at ``delta`` (bisection).

    ``gap_ratio`` None = no gap release (DP-FedAvg with uniform weights).
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError(f"target_epsilon: expected a finite number > 0, got {target_epsilon}")

    def eps(z: float) -> float:
        return client_epsilon(z, None if gap_ratio is None else gap_ratio * z, rounds, delta)

    lo, hi = 1e-3, 1.0
    while eps(hi) > target_epsilon:
        hi *= 2
        if hi > 1e6:
            raise ValueError(f"target_epsilon {target_epsilon}: unreachable")
    while hi - lo > tol * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if eps(mid) > target_epsilon else (lo, mid)
    return hi, None if gap_ratio is None else gap_ratio * hi
