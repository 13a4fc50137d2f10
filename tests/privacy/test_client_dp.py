"""Client-level DP for weighted averaging (privacy/client_dp.py) and its one-run canary audit
(attacks/one_run_audit.py): the noise follows the weights actually used; a uniform-weight calibration is caught."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from fedprint.attacks.one_run_audit import audit_weighted_sum, epsilon_lower_bound, max_bound
from fedprint.privacy.client_dp import (
    calibrate,
    cap_weights,
    client_epsilon,
    dp_weighted_sum,
    model_noise_std,
    noisy_gaps,
)


def test_cap_weights_projects_onto_the_capped_simplex():
    got = cap_weights({"a": 0.9, "b": 0.05, "c": 0.05}, cap=0.5)
    assert got["a"] == pytest.approx(0.5) and got["b"] == pytest.approx(0.25) and sum(got.values()) == pytest.approx(1)
    inside = {"a": 0.4, "b": 0.35, "c": 0.25}
    assert cap_weights(inside, 0.5) == pytest.approx(inside)
    chained = cap_weights({"a": 0.7, "b": 0.2, "c": 0.06, "d": 0.04}, cap=0.3)
    assert max(chained.values()) <= 0.3 + 1e-12 and sum(chained.values()) == pytest.approx(1)
    with pytest.raises(ValueError, match="cap"):
        cap_weights({"a": 0.5, "b": 0.5}, cap=0.4)


def test_noise_scale_follows_the_largest_weight_and_clipping_bounds_each_update():
    updates = {"a": [np.full(4, 10.0)], "b": [np.full(4, 0.1)]}
    alpha = {"a": 0.8, "b": 0.2}
    assert model_noise_std(1.5, alpha, 2.0) == pytest.approx(2.0 * 2 * 1.5 * 0.8)
    exact, info = dp_weighted_sum(updates, alpha, clip=1.0, noise_multiplier=0.0, rng=np.random.default_rng(0))
    # a's update (norm 20) is clipped to norm 1: 0.5 per coordinate; b's (norm 0.2) is kept
    np.testing.assert_allclose(exact[0], 0.8 * 0.5 + 0.2 * 0.1)
    assert info["clipped"] == 1 and info["sigma"] == 0.0
    noisy = [dp_weighted_sum({"a": [np.zeros(20000)]}, {"a": 1.0}, 1.0, 2.0, np.random.default_rng(s))[0][0]
             for s in range(2)]
    assert np.std(noisy[0]) == pytest.approx(4.0, rel=0.03) and not np.array_equal(*noisy)


def test_gap_release_and_accounting():
    g = noisy_gaps({"a": 5.0, "b": -0.2}, 0.0, np.random.default_rng(0))
    assert g == {"a": 1.0, "b": -0.2}  # clipped to [-1, 1] before the noise
    draws = [noisy_gaps({"a": 0.0}, 1.5, np.random.default_rng(s))["a"] for s in range(4000)]
    assert np.std(draws) == pytest.approx(3.0, rel=0.05)  # sensitivity 2 x multiplier 1.5
    e1, e5 = client_epsilon(2.0, None, 1, 1e-5), client_epsilon(2.0, None, 5, 1e-5)
    assert 0 < e1 < e5 and client_epsilon(2.0, 2.0, 5, 1e-5) > e5  # the gap release costs privacy too
    assert client_epsilon(0.0, None, 1, 1e-5) == math.inf
    z, zg = calibrate(4.0, 1e-5, 5, gap_ratio=1.0)
    assert client_epsilon(z, zg, 5, 1e-5) == pytest.approx(4.0, rel=0.01) and zg == z


def test_one_run_bound_resolution_matches_the_paper():
    assert max_bound(100) == pytest.approx(3.49, abs=0.02)
    assert max_bound(1000) == pytest.approx(5.81, abs=0.02)
    assert epsilon_lower_bound(1000, 1000, 500) == 0.0  # chance-level guesses prove nothing


# ----------------------------------------------------------------------------------- the canary audit
M_TOTAL, CANARIES, DIM, CLIP = 100_000, 1000, 4000, 1.0
DELTA = 1e-5


def _release(calibration: str, z: float):
    """The aggregator of one round: canaries hold all the weight (α = 1/CANARIES each, the other clients 0 —
    what AFFR's weights can do), noise either for those weights or for a uniform 1/M_TOTAL average."""
    alpha_c = 1.0 / CANARIES

    def run(canary_updates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        alpha = {f"c{j}": alpha_c for j in range(CANARIES)}
        if calibration == "sound":
            out, _ = dp_weighted_sum({f"c{j}": [canary_updates[j]] for j in range(CANARIES)}, alpha, CLIP, z, rng)
            return out[0]
        total = alpha_c * canary_updates.sum(axis=0)
        return total + rng.normal(0.0, z * 2 * CLIP / M_TOTAL, DIM)  # σ for the uniform 1/m average
    return run


@pytest.mark.parametrize("calibration", ["sound", "uniform"])
def test_canary_audit_catches_uniform_calibration_and_passes_the_sound_one(calibration):
    z, _ = calibrate(2.0, DELTA, 1, gap_ratio=None)
    claimed = client_epsilon(z, None, 1, DELTA)
    res = audit_weighted_sum(_release(calibration, z), canaries=CANARIES, dim=DIM, clip=CLIP, guesses=400,
                             rng=np.random.default_rng(3), delta=DELTA)
    print(f"{calibration}: claimed eps {claimed:.2f}, eps_lb {res['epsilon_lb']:.2f} "
          f"(max {res['max_bound']:.2f}, {res['correct']}/{res['guesses']} right)")
    if calibration == "sound":
        assert res["epsilon_lb"] <= claimed
    else:
        assert res["epsilon_lb"] > claimed


def test_flower_dp_wrapper_refuses_or_undernoises_affr():
    """Flower 1.41's fixed-clipping wrapper: with its accountant it refuses AFFR (custom aggregate_train); without
    it, its σ = z·C/m is calibrated for the uniform average and under-noises AFFR's heaviest client by α·m."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping
    from flwr.supercore.differential_privacy import compute_stdv
    from flwr.supercore.privacy_accounting import NeighboringRelation, PrivacyConfig, SamplingMethod

    from fedprint.server.affr import AFFR

    # Flower's RdpAccountant needs the optional dp-accounting package; the wrapper only reads `.config` when
    # it decides whether to accept a strategy, so a stand-in with Flower's own PrivacyConfig is enough.
    acc = SimpleNamespace(config=PrivacyConfig(target_delta=DELTA, population_size=3,
                                               neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                                               sampling_method=SamplingMethod.NO_AMPLIFICATION))
    with pytest.raises(ValueError, match="FedAvg.aggregate_train"):
        DifferentialPrivacyServerSideFixedClipping(AFFR(num_rounds=3), noise_multiplier=1.0, clipping_norm=1.0,
                                                   num_sampled_clients=3, accountant=acc)
    z, clip, m = 1.0, 1.0, 3
    alpha = {"a": 0.7, "b": 0.2, "c": 0.1}
    flower = compute_stdv(z, clip, m)  # add-or-remove-one: sensitivity of the uniform average C/m
    effective = flower / (clip * max(alpha.values()))  # noise multiplier AFFR's weighted sum actually gets
    assert effective == pytest.approx(z / (m * 0.7)) and effective < z
    ours = model_noise_std(clip, alpha, z) / (2 * clip * max(alpha.values()))  # replace-one sensitivity 2Cα
    assert ours == pytest.approx(z)
    uniform = {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}  # where Flower's wrapper is right, ours agrees (x2: replace-one)
    assert model_noise_std(clip, uniform, z) == pytest.approx(2 * flower)
