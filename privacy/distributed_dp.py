"""Distributed client-level DP under secure aggregation: every client adds its share of the noise.

Unit and relation: as :mod:`fedprint.privacy.client_dp` — one institution, replace-one. Weights α and the cohort m
are fixed by the server from public values (the clients' *noised* gaps, the cohort sent the round) before any
update is masked; the weights are capped at c/m.

Mechanism, per round (:class:`fedprint.server.secure_strategy.SecureAggregation` with ``dp``):

1. (AFFR) each client clips its gap to [−1, 1] and adds N(0, (2·z_g)²) itself before reporting it — the same
   Gaussian mechanism the central variant's server applies per coordinate, now local (the server never sees a raw
   gap).
2. Each client clips Δ_i to L2 norm C, scales it by its α_i and adds N(0, σ²/n_min · I), σ = z·2C·max α (the
   weighted sum's replace-one sensitivity), n_min = t, the reconstruction threshold (:func:`client_noise_std`).
3. The server unmasks only the sum over U2, the clients whose masked vectors arrived; a round with ``|U2|`` < t is
   aborted (nothing unmasked), so every unmasked sum carries at least t noise shares: total variance >= σ². No
   renormalisation over U2 (a missing client counts as a zero update at its weight, as in the central variant).

Guarantee (stated for :func:`accounting`):

* **ε_distributed** — against the server (and anyone who sees the models), when at least t clients of every sum
  are honest (follow the protocol and do not give the server their noise): the sum is a Gaussian mechanism with
  std >= σ, accounted with the same RDP accountant as the central variant (:func:`fedprint.privacy.client_dp.
  composed_epsilon`), so it equals the central ε for the same z. Assumptions the analysis makes and the code cannot
  enforce: (a) which clients drop out does not depend on their data (a client whose data makes it fail changes the
  noise variance, not only its term); (b) each client's rounding onto the ring (stochastic, one step 2c/(R−1) ≈
  1e-7 at the defaults) is treated as exact — the exact treatment is the distributed discrete Gaussian
  (Kairouz, Liu, Steinke, ICML 2021), not implemented here.
* **ε_own_noise** — a floor that holds without (a), (b) or honest peers, i.e. against a server colluding with every
  other client: client j's message is a post-processing of α_j Δ̃_j + N(0, σ²/t), a Gaussian mechanism with
  multiplier z/√t (its gap release unchanged).
* Colluding clients subtract their own noise: against a server with c colluding clients the ε_distributed bound
  needs ``|U2|`` − c >= t; the report gives ``|U2|`` per round so the margin is visible.

Not protected: the cohort, names, the clients' example counts, their noised gaps' standard errors, training losses
and test metrics (the server's round logs), and which clients were in each sum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedprint.privacy.client_dp import clip_update, composed_epsilon


def client_noise_std(noise_multiplier: float, clip: float, max_weight: float, n_min: int) -> float:
    """Per-client std σ/√n_min of the noise share, σ = z·2C·max α (module docstring, step 2)."""
    if n_min < 1:
        raise ValueError(f"n_min: expected >= 1, got {n_min}")
    return float(noise_multiplier * 2.0 * clip * max_weight / math.sqrt(n_min))


def clip_and_noise(delta: np.ndarray, weight: float, clip: float, std: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
    """α·clip(Δ, C) + N(0, std² I): a client's noised, weighted contribution (``rng`` from OS entropy by caller)."""
    (clipped,), norm = clip_update([np.asarray(delta, np.float64)], clip)
    return weight * clipped + rng.normal(0.0, std, size=clipped.shape), {"norm": norm, "std": std}


def noisy_gap(gap: float, gap_std: float, rng: np.random.Generator) -> float:
    """A client's own gap release: clip to [−1, 1] plus N(0, gap_std²), gap_std = 2·z_g (module docstring, step 1)."""
    return float(np.clip(gap, -1.0, 1.0) + rng.normal(0.0, gap_std))


def accounting(releases: Sequence[dict[str, Any]], delta: float) -> dict[str, Any]:
    """ε of the releases made so far (each ``noise_multiplier``, ``gap_noise_multiplier``, ``n_min``), with the
    central variant's ε for the same noise and the own-noise floor (module docstring)."""
    pairs = [(r["noise_multiplier"], r["gap_noise_multiplier"]) for r in releases]
    eps = composed_epsilon(pairs, delta)
    floor = composed_epsilon([(r["noise_multiplier"] / math.sqrt(r["n_min"]), r["gap_noise_multiplier"])
                              for r in releases], delta)
    return {
        "level": "distributed", "unit": "institution (one client's whole data replaced)", "delta": delta,
        "epsilon": eps, "epsilon_central_same_noise": eps, "epsilon_own_noise_floor": floor,
        "releases": len(releases), "rounds": len({r["round"] for r in releases}),
        "in_sum": [r.get("in_sum") for r in releases],
        "statement": ("epsilon holds against the server when at least t = n_min clients of every sum are honest, "
                      "drop-outs do not depend on client data and the ring rounding is treated as exact; "
                      "epsilon_own_noise_floor holds against a server colluding with all other clients (each "
                      "client's own noise share, z/sqrt(t)); epsilon_central_same_noise is what the central variant "
                      "(server adds the noise, sees raw updates) gives for the same z"),
        "accountant": "RDP (Opacus analysis), Gaussian mechanisms composed over every round that reached the clients",
    }
