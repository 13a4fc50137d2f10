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


# ---------------------------------------------------------------------------- issue 59 §4: the log must be whole


def _two_rounds_with_checkpoint(run_dir):
    """Two DP rounds logged as the ServerApp logs them, and the checkpoint it writes after round 2."""
    from flwr.app import Array, ArrayRecord

    from fedprint.server.checkpoint import save_checkpoint

    strat = _strategy(0.05)
    strat.on_release = lambda r: append_release(run_dir, r)
    _round(strat, 1)
    _round(strat, 2)
    save_checkpoint(run_dir, 2, ArrayRecord({k: Array(v) for k, v in _glob().items()}),
                    strategy="fedavg", strategy_state=strat.state_dict(), rounds=[])
    return strat


def _resume(run_dir) -> DPAFFR:
    """run_federation's resume order: the release log first, then the checkpoint's strategy state."""
    from fedprint.server.checkpoint import load_checkpoint

    strat = _strategy(0.05)
    strat.restore_releases(load_releases(run_dir))
    state, _ = load_checkpoint(run_dir)
    strat.load_state_dict(state["strategy_state"])
    return strat


def test_a_deleted_release_log_refuses_the_resume_naming_the_rounds(tmp_path):
    _two_rounds_with_checkpoint(tmp_path)
    assert _resume(tmp_path).accounting()["releases"] == 2  # the whole log: accepted
    (tmp_path / "checkpoint" / "dp_releases.json").unlink()
    with pytest.raises(ValueError, match=r"2 round\(s\) were done and 2 release\(s\) logged, the release log holds "
                                         r"0 and none for round\(s\) 1, 2; .*resume is refused"):
        _resume(tmp_path)


def test_a_truncated_log_or_an_old_checkpoint_is_refused_too(tmp_path):
    import json

    from fedprint.server.checkpoint import RELEASES_FORMAT

    _two_rounds_with_checkpoint(tmp_path)
    log = tmp_path / "checkpoint" / "dp_releases.json"
    releases = json.loads(log.read_text())["releases"]
    log.write_text(json.dumps({"format": RELEASES_FORMAT, "releases": releases[:1]}))
    with pytest.raises(ValueError, match=r"holds 1 and none for round\(s\) 2;"):
        _resume(tmp_path)
    # round 2 logged twice but round 1 gone (same count): the rounds done still have to be there
    log.write_text(json.dumps({"format": RELEASES_FORMAT, "releases": [releases[1], releases[1]]}))
    with pytest.raises(ValueError, match=r"none for round\(s\) 1;"):
        _resume(tmp_path)
    state_file = tmp_path / "checkpoint" / "state.json"  # a checkpoint written before releases_logged existed
    state = json.loads(state_file.read_text())
    del state["strategy_state"]["releases_logged"]
    state_file.write_text(json.dumps(state))
    log.unlink()
    with pytest.raises(ValueError, match=r"none for round\(s\) 1, 2"):
        _resume(tmp_path)


def test_a_resumed_strategy_without_its_log_restored_runs_no_round(tmp_path):
    first = _two_rounds_with_checkpoint(tmp_path)
    strat = _strategy(0.05)
    strat.load_state_dict(first.state_dict())  # restore_releases never called
    with pytest.raises(RuntimeError, match="restore its release log"):
        _round(strat, 1)
