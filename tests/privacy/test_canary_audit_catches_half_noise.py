"""Issue 24 §4: the replace-one canary audit runs the real DP-AFFR aggregator with a round's own weights; a sound
aggregator passes, one calibrated for add/remove (half the noise) is flagged."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.attacks.one_run_audit import audit_client_dp_release
from fedprint.privacy.client_dp import client_epsilon
from fedprint.server.dp_affr import DPAFFR

Z, CLIP, DELTA = 3.0, 1.0, 1e-5
WEIGHTS = {"inst-a": 0.5, "inst-b": 0.3, "inst-c": 0.2}  # a round's cohort weights (heaviest: inst-a)


class HalfNoiseDPAFFR(DPAFFR):
    """A broken aggregator: σ = z·C·max α (add/remove calibration) where replace-one needs z·2C·max α."""

    def _aggregate_arrays(self, decoded, weights):
        z = self.noise_multiplier
        self.noise_multiplier = z / 2
        try:
            return super()._aggregate_arrays(decoded, weights)
        finally:
            self.noise_multiplier = z


@pytest.mark.parametrize("broken", [False, True])
def test_canary_audit_passes_the_sound_aggregator_and_flags_half_noise(broken):
    rng = np.random.default_rng(11)
    agg = (HalfNoiseDPAFFR if broken else DPAFFR)(num_rounds=1, step=0.0, noise_multiplier=Z,
                                                  gap_noise_multiplier=None, clip=CLIP, rng=rng)
    claimed = client_epsilon(Z, None, 1, DELTA)
    res = audit_client_dp_release(noise_multiplier=Z, clip=CLIP, weights=WEIGHTS, claimed_epsilon=claimed, rng=rng,
                                  delta=DELTA, aggregator=agg)
    print(f"broken={broken}: claimed {claimed:.2f}, eps_lb {res['epsilon_lb']:.2f} (cap {res['max_bound']:.2f}, "
          f"{res['correct']}/{res['guesses']})")
    assert res["canary_weight"] == 0.5 and res["canaries"] == 20_000
    assert res["ok"] is (not broken)
