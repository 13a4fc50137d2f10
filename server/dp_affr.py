"""AFFR (and FedAvg) with client-level differential privacy that holds for the weights actually used.

:class:`DPAFFR` is :class:`server.affr.AFFR` with the mechanism of :mod:`privacy.client_dp`: noisy gaps drive the
weight update, the weights are capped at c/m (m = clients in the round), each client's update θ_i − θ_g is clipped
to C, and the release θ_g + Σ α_i Δ̃_i gets N(0, (z·2C·max α)²) noise. With ``step = 0`` the weights stay uniform,
no gap is released, and it is DP-FedAvg (σ = z·2C/m, which is Flower's own ``compute_stdv`` ×2 because the
relation here is replace-one). The proof and what is not protected are in :mod:`privacy.client_dp`.

Noise comes from OS entropy (``secrets``) and is never stored; tests inject a generator through ``rng``.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord

from privacy.client_dp import cap_weights, client_epsilon, dp_weighted_sum, noisy_gaps
from server.affr import AFFR

#: How a client-DP run states its sampling: every client takes part in every round.
NO_SAMPLING = "none: every client takes part in every round, so there is no privacy amplification by sampling"


class DPAFFR(AFFR):
    """AFFR / FedAvg with client-level (ε, δ)-DP (see module docstring).

    Parameters
    ----------
    num_rounds, step, gap_key, **fedavg_kwargs
        As :class:`server.affr.AFFR` (``step = 0``: DP-FedAvg with uniform weights).
    noise_multiplier : float
        z of the model release (> 0).
    gap_noise_multiplier : float or None
        z_g of the gap release; None only with ``step = 0`` (no gaps used).
    clip : float
        C, L2 bound of each client's update (> 0).
    alpha_cap : float
        c: no client weighs more than c/m (m = clients in the round), c >= 1. Default 2.
    delta : float
        δ of the reported (ε, δ) (default 1e-5).
    rng : numpy.random.Generator, optional
        Tests only; default: seeded from OS entropy, never stored.
    """

    def __init__(self, num_rounds: int, step: float = 0.8, *, noise_multiplier: float,
                 gap_noise_multiplier: float | None, clip: float, alpha_cap: float = 2.0, delta: float = 1e-5,
                 rng: np.random.Generator | None = None, **kwargs: Any) -> None:
        super().__init__(num_rounds, step, **kwargs)
        if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
            raise ValueError(f"noise_multiplier: expected a finite number > 0, got {noise_multiplier!r}")
        if step > 0 and not (gap_noise_multiplier and math.isfinite(gap_noise_multiplier) and gap_noise_multiplier > 0):
            raise ValueError("gap_noise_multiplier: AFFR (step > 0) releases gaps, so they need noise > 0")
        if not (math.isfinite(clip) and clip > 0):
            raise ValueError(f"clip: expected a finite number > 0, got {clip!r}")
        if not alpha_cap >= 1:
            raise ValueError(f"alpha_cap: expected >= 1 (weights may reach alpha_cap/m), got {alpha_cap!r}")
        self.noise_multiplier = float(noise_multiplier)
        self.gap_noise_multiplier = None if step == 0 else float(gap_noise_multiplier)
        self.clip, self.alpha_cap, self.delta = float(clip), float(alpha_cap), float(delta)
        self._rng = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
        self.sigmas: list[float] = []

    def _gaps_for_update(self, gaps: dict[str, float]) -> dict[str, float]:
        if self.gap_noise_multiplier is None:
            return gaps
        return noisy_gaps(gaps, self.gap_noise_multiplier, self._rng)

    def _constrain(self, weights: dict[str, float]) -> dict[str, float]:
        return cap_weights(weights, min(1.0, self.alpha_cap / len(weights)))

    def _aggregate_arrays(self, decoded: list[dict], weights: list[float]) -> ArrayRecord:
        """θ_g + Σ α_i clip(θ_i − θ_g, C) + N(0, (z·2C·max α)² I) over the floating-point arrays; integer
        buffers keep the global model's value (averaging them would be an unprotected release)."""
        assert self._reference is not None
        keys = [k for k, ref in self._reference.items() if np.issubdtype(np.dtype(ref.dtype), np.floating)]
        ref = {k: self._reference[k].numpy().astype(np.float64) for k in self._reference.keys()}
        updates = {str(i): [np.asarray(d[k], np.float64) - ref[k] for k in keys] for i, d in enumerate(decoded)}
        alpha = {str(i): float(w) for i, w in enumerate(weights)}
        noisy, info = dp_weighted_sum(updates, alpha, self.clip, self.noise_multiplier, self._rng)
        self.sigmas.append(info["sigma"])
        new = dict(zip(keys, noisy, strict=True))
        out = {}
        for k, r in self._reference.items():
            value = ref[k] + new[k] if k in new else ref[k]
            out[k] = Array(value.astype(np.dtype(r.dtype)))
        return ArrayRecord(out)

    def accounting(self) -> dict[str, Any]:
        """The client-level guarantee after the rounds done so far (JSON-able, for reports)."""
        rounds = self.rounds_done
        eps = client_epsilon(self.noise_multiplier, self.gap_noise_multiplier, max(rounds, 1), self.delta)
        return {"level": "client", "unit": "institution (one client's whole data replaced)",
                "epsilon": eps if rounds else 0.0, "delta": self.delta, "rounds": rounds,
                "noise_multiplier": self.noise_multiplier, "gap_noise_multiplier": self.gap_noise_multiplier,
                "clip": self.clip, "alpha_cap": f"{self.alpha_cap:g}/m", "sampling": NO_SAMPLING,
                "accountant": "RDP (Opacus analysis), Gaussian mechanisms composed over rounds",
                "not_protected": "raw gaps and client metrics in the server's own round logs (trusted server); "
                                 "the number of clients and who took part"}
