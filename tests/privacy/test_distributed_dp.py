"""Distributed client-level DP under secure aggregation (privacy/distributed_dp.py, server/secure_strategy.py).

Each client's noise share is σ/√t, the unmasked sum carries at least σ² of noise, nothing is renormalised, AFFR's
gaps arrive noised from the clients, and ε is reported beside the central variant's and the own-noise floor.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord

from fedprint.config.experiment import DPSection
from fedprint.config.federation import FederationConfig
from fedprint.lab.secagg_grid import SecAggGrid
from fedprint.privacy.client_dp import composed_epsilon
from fedprint.privacy.distributed_dp import client_noise_std
from fedprint.server.server_app import build_strategy


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    from flwr.supercore.task_identity import TaskIdentity

    for attr, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 0)):
        monkeypatch.setattr(TaskIdentity, attr, value)


def _run(name: str, rounds: int, size: int = 3000, seed: int = 0, gap=None):
    dp = DPSection(enabled=True, level="client", noise_multiplier=0.8, client_clip=0.5)
    fed = FederationConfig(secure_aggregation=True)
    strat = build_strategy(name, num_rounds=rounds, step=0.8, proximal_mu=0.0, fed=fed, min_nodes=3, dp=dp,
                           secure=True, timeout=10.0)
    strat.fraction_evaluate = 0.0
    same = lambda node, rnd, g: dict(g)  # noqa: E731  (zero updates: the released update is pure noise)
    grid = SecAggGrid([1, 2, 3, 4, 5], same, gap=gap, rng=np.random.default_rng(seed))
    g0 = ArrayRecord({"w": Array(np.zeros(size, np.float32))})
    res = strat.start(grid=grid, initial_arrays=g0, num_rounds=rounds, timeout=10.0)
    return strat, res.arrays["w"].numpy().astype(np.float64)


def test_each_client_adds_sigma_over_sqrt_t_and_the_sum_carries_at_least_sigma():
    strat, w = _run("fedavg", 1, size=20000)  # var estimate ±1 % (1 sd): rel 0.1 is 10 sd
    release = strat.releases[0]
    sigma = 0.8 * 2 * 0.5 * (1 / 5)  # z · 2C · max α, α = 1/5
    assert release["n_min"] == 3 and release["client_std"] == pytest.approx(sigma / math.sqrt(3))
    assert release["client_std"] == pytest.approx(client_noise_std(0.8, 0.5, 0.2, 3))
    # 5 clients in the sum, no renormalisation: variance 5·σ²/3 >= σ²
    assert np.var(w) == pytest.approx(5 * sigma ** 2 / 3, rel=0.1)
    assert strat.secagg_log[1]["in_sum"] == 5


def test_accounting_reports_central_epsilon_and_the_own_noise_floor():
    strat, _ = _run("fedavg", 2)
    acc = strat.accounting()
    central = composed_epsilon([(0.8, None)] * 2, acc["delta"])
    assert acc["level"] == "distributed" and acc["releases"] == 2
    assert acc["epsilon"] == pytest.approx(central) and acc["epsilon_central_same_noise"] == pytest.approx(central)
    assert acc["epsilon_own_noise_floor"] == pytest.approx(composed_epsilon([(0.8 / math.sqrt(3), None)] * 2,
                                                                            acc["delta"]))
    assert acc["epsilon_own_noise_floor"] > acc["epsilon"]


def test_affr_gaps_are_noised_by_the_clients_and_weights_capped():
    strat, _ = _run("affr", 2, size=50, gap=lambda node, rnd: 0.0 if rnd == 1 else 0.1 * node)
    reported = strat.history[-1]["reported_gaps"]
    assert len(reported) == 5
    assert any(abs(v - 0.1 * int(k.split("-")[1])) > 1e-6 for k, v in reported.items())  # noise was added
    weights = strat.history[-1]["round_weights"]
    assert max(weights.values()) <= 2.0 / 5 + 1e-9  # alpha_cap 2 / m
    assert strat.releases[-1]["gap_noise_multiplier"] == pytest.approx(0.8)
