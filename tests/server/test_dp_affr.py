"""DP-AFFR (server/dp_affr.py): clipped updates, capped weights, noisy gaps, fresh noise, honest accounting."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.privacy.client_dp import client_epsilon
from fedprint.server.dp_affr import DPAFFR
from tests.server.test_affr import SHAPES, configure, numpy_of, task_identity, three_models, train_reply  # noqa: F401


def _round(strat, t, glob, models, gaps):
    configure(strat, t, glob, nodes=tuple(sorted(models)))  # the cohort: the nodes the round is sent to
    return strat.aggregate_train(t, [train_reply(n, models[n], gaps[n]) for n in sorted(models)])


@pytest.fixture
def glob():

    return {k: (np.zeros(shape, dtype) if not np.issubdtype(dtype, np.integer) else np.asarray(3, dtype).reshape(shape))
            for k, (shape, dtype) in SHAPES.items()}


def test_release_is_the_clipped_weighted_update_plus_noise_of_the_stated_scale(glob):
    models = three_models()
    strat = DPAFFR(num_rounds=3, step=0.0, noise_multiplier=1e-9, gap_noise_multiplier=None, clip=0.5,
                   rng=np.random.default_rng(1))
    arrays, _ = _round(strat, 1, glob, models, {11: 0.0, 22: 0.0, 33: 0.0})
    out = numpy_of(arrays)
    floats = [k for k, (_, d) in SHAPES.items() if not np.issubdtype(d, np.integer)]
    expect = {k: np.zeros(SHAPES[k][0]) for k in floats}
    for n in (11, 22, 33):
        delta = [models[n][k].astype(np.float64) for k in floats]  # global is zero: update = local model
        norm = np.sqrt(sum(np.sum(d ** 2) for d in delta))
        for k, d in zip(floats, delta, strict=True):
            expect[k] += d * min(1.0, 0.5 / norm) / 3
    for k in floats:
        np.testing.assert_allclose(out[k], expect[k], rtol=1e-5, atol=1e-6)
    assert out["bn.count"] == glob["bn.count"]  # integer buffers are not averaged (unprotected release)
    assert strat.sigmas == [pytest.approx(1e-9 * 2 * 0.5 / 3)]


def test_weights_are_capped_and_gaps_are_noisy(glob):
    models = three_models()
    strat = DPAFFR(num_rounds=4, step=0.8, noise_multiplier=1.0, gap_noise_multiplier=0.5, clip=1.0, alpha_cap=1.2,
                   rng=np.random.default_rng(2))
    for t in (1, 2, 3):
        _round(strat, t, glob, models, {11: 0.9, 22: 0.0, 33: -0.9})
        w = strat.history[-1]["round_weights"]
        assert max(w.values()) <= 1.2 / 3 + 1e-12 and sum(w.values()) == pytest.approx(1.0)
    h = strat.history[-1]
    assert h["reported_gaps"]["node-11"] == 0.9 and h["gaps"]["node-11"] != 0.9  # the update saw noisy gaps
    acc = strat.accounting()
    assert acc["rounds"] == 3 and acc["epsilon"] == pytest.approx(client_epsilon(1.0, 0.5, 3, 1e-5))
    assert "no privacy amplification" in acc["sampling"]


def test_noise_is_fresh_and_not_chosen_by_anyone(glob):
    models = three_models()
    outs = []
    for _ in range(2):
        strat = DPAFFR(num_rounds=2, step=0.0, noise_multiplier=1.0, gap_noise_multiplier=None, clip=1.0)
        arrays, _ = _round(strat, 1, glob, models, {11: 0.0, 22: 0.0, 33: 0.0})
        outs.append(numpy_of(arrays)["conv.weight"])
        assert "rng" not in strat.state_dict() and "seed" not in str(strat.state_dict())
    assert not np.array_equal(*outs)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="gap_noise_multiplier"):
        DPAFFR(num_rounds=2, step=0.5, noise_multiplier=1.0, gap_noise_multiplier=None, clip=1.0)
    with pytest.raises(ValueError, match="alpha_cap"):
        DPAFFR(num_rounds=2, step=0.0, noise_multiplier=1.0, gap_noise_multiplier=None, clip=1.0, alpha_cap=0.5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        DPAFFR(num_rounds=2, step=0.0, noise_multiplier=0.0, gap_noise_multiplier=None, clip=1.0)
