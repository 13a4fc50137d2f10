"""Issue 59 §5: every canary audit reports its power — the smallest noise shortfall it catches with probability
>= 0.9 at the run's z — that power is monotone in z (one release per canary), several rounds per canary restore it
at large z, and the audit does catch the shortfall it says it can."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.attacks.audit_power import audit_power, choose_rounds
from fedprint.attacks.one_run_audit import audit_client_dp_release
from fedprint.privacy.client_dp import client_epsilon
from fedprint.server.dp_affr import DPAFFR

DELTA = 1e-5
WEIGHTS = {"inst-a": 0.5, "inst-b": 0.3, "inst-c": 0.2}


class ShortNoiseDPAFFR(DPAFFR):
    """A broken aggregator whose noise is ``factor`` times what the claimed guarantee needs."""

    factor = 1.0

    def _aggregate_arrays(self, decoded, weights):
        z = self.noise_multiplier
        self.noise_multiplier = z * self.factor
        try:
            return super()._aggregate_arrays(decoded, weights)
        finally:
            self.noise_multiplier = z


def _power(z: float, rounds: int = 1, trials: int = 20_000, guesses: int = 500) -> dict:
    return audit_power(z, trials=trials, guesses=guesses, claimed_epsilon=client_epsilon(z, None, rounds, DELTA),
                       rounds=rounds, delta=DELTA, replicates=100)


def test_power_is_monotone_in_z_and_rounds_restore_it():
    shortfalls = [_power(z)["detectable_shortfall"] for z in (2.0, 5.0, 9.0)]
    print("detectable shortfall at z = 2, 5, 9 (one release per canary):", shortfalls)
    assert all(s is not None for s in shortfalls)
    assert shortfalls == sorted(shortfalls) and shortfalls[-1] > shortfalls[0]  # a larger z hides more
    assert _power(9.0)["half_noise_detection"] < 0.9  # the 3/6 at z = 9
    k = choose_rounds(9.0, available=30)
    assert k == 21
    boosted = _power(9.0, rounds=k)
    assert boosted["half_noise_detection"] >= 0.9 and boosted["detectable_shortfall"] <= shortfalls[-1]
    assert _power(1.0)["detectable_shortfall"] is None  # claimed ε above the audit's ceiling: no power at all


def test_choose_rounds_respects_the_runs_releases_and_the_budget():
    assert choose_rounds(1.5, available=30) == 1 and choose_rounds(4.0, available=30) == 4
    assert choose_rounds(9.0, available=3) == 3 and choose_rounds(9.0, available=30, max_rounds=10) == 10
    with pytest.raises(ValueError, match="noise_multiplier"):
        choose_rounds(0.0, available=3)


@pytest.mark.parametrize("broken", [False, True])
def test_the_audit_catches_the_shortfall_it_reports(broken):
    z, trials, guesses = 3.0, 4_000, 200
    k = choose_rounds(z, available=30)
    claimed = client_epsilon(z, None, k, DELTA)
    power = audit_power(z, trials=trials, guesses=guesses, claimed_epsilon=claimed, rounds=k, delta=DELTA)
    assert power["detectable_shortfall"] is not None
    rng = np.random.default_rng(21)
    agg = ShortNoiseDPAFFR(num_rounds=1, step=0.0, noise_multiplier=z, gap_noise_multiplier=None, clip=1.0, rng=rng)
    agg.factor = power["noise_factor"] if broken else 1.0
    res = audit_client_dp_release(noise_multiplier=z, clip=1.0, weights=WEIGHTS, claimed_epsilon=claimed, rng=rng,
                                  delta=DELTA, aggregator=agg, trials=trials, guesses=guesses, rounds=k)
    print(f"broken={broken}: k={k}, claimed {claimed:.2f}, eps_lb {res['epsilon_lb']:.2f}, power {power}")
    assert res["power"]["detectable_shortfall"] == power["detectable_shortfall"] and res["rounds"] == k
    assert res["ok"] is (not broken)
