"""Issue 24 §2: every client-DP release is accounted with the parameters it used; a resume with other [dp]
settings is refused naming the difference; a release is logged before its model leaves the server."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.privacy.client_dp import client_epsilon, composed_epsilon
from fedprint.server.checkpoint import append_release, load_releases
from fedprint.server.dp_affr import DPAFFR
from tests.privacy.test_client_dp_cohort import _glob, _models
from tests.server.test_affr import configure, task_identity, train_reply  # noqa: F401


def _strategy(z: float, **kw) -> DPAFFR:
    return DPAFFR(num_rounds=3, step=0.0, noise_multiplier=z, gap_noise_multiplier=None, clip=1.0,
                  rng=np.random.default_rng(0), **kw)


def _round(strat: DPAFFR, t: int) -> None:
    models = _models()
    configure(strat, t, _glob(), nodes=(1, 2, 3))
    strat.aggregate_train(t, [train_reply(n, models[n], 0.0, name=f"i{n}") for n in (1, 2, 3)])


def test_resume_with_other_dp_settings_is_refused_naming_them():
    first = _strategy(0.05)
    _round(first, 1)
    _round(first, 2)
    state = first.state_dict()
    assert state["dp"]["noise_multiplier"] == 0.05
    with pytest.raises(ValueError, match=r"noise_multiplier: checkpoint 0\.05, now 50"):
        _strategy(50.0).load_state_dict(state)
    with pytest.raises(ValueError, match="noise_multiplier"):
        _strategy(50.0).restore_releases(first.releases)
    same = _strategy(0.05)
    same.load_state_dict(state)  # same settings: accepted
    same.restore_releases(first.releases)
    _round(same, 1)
    assert same.accounting()["epsilon"] == pytest.approx(client_epsilon(0.05, None, 3, 1e-5))


def test_the_accountant_composes_each_release_with_its_own_parameters():
    """Two releases at z = 0.05 and one at z = 50: ε is that of the composition (≈ 535 in the issue), not 3 x z=50."""
    eps = composed_epsilon([(0.05, None), (0.05, None), (50.0, None)], 1e-5)
    assert eps > 100 and eps == pytest.approx(client_epsilon(0.05, None, 2, 1e-5), rel=1e-3)
    strat = _strategy(50.0)
    strat.releases = [{"round": r, "noise_multiplier": z, "gap_noise_multiplier": None, "cohort_size": 3}
                      for r, z in ((1, 0.05), (2, 0.05), (3, 50.0))]
    assert strat.accounting()["epsilon"] == pytest.approx(eps)


def test_a_release_is_logged_before_the_model_leaves_and_a_rerun_round_counts_twice(tmp_path):
    strat = _strategy(1.0)
    seen = []
    strat.on_release = lambda r: (seen.append(r), append_release(tmp_path, r))
    _round(strat, 1)
    assert len(seen) == 1 and seen[0]["sigma"] == pytest.approx(2 / 3) and seen[0]["weights"]["i1"] == 1 / 3
    # the process dies after Flower sent round 1's model but before its checkpoint: round 1 runs again
    again = _strategy(1.0)
    again.restore_releases(load_releases(tmp_path))
    again.on_release = lambda r: append_release(tmp_path, r)
    _round(again, 1)
    acc = again.accounting()
    assert acc["releases"] == 2 and acc["rounds"] == 1 and acc["repeated_rounds"] == [1]
    assert acc["epsilon"] == pytest.approx(client_epsilon(1.0, None, 2, 1e-5))
    assert len(load_releases(tmp_path)) == 2
    assert "n = 3 clients" in acc["delta_rule"]
